// Counting proxies for the diagnostics run: a TCP proxy in front of PostgreSQL that parses the wire protocol (round
// trips, statements, transactions, time waiting for the server) and an HTTP proxy in front of the chain RPC (calls
// per JSON-RPC method and their time). They add a hop, so they are only used in the diagnostics run, never in the
// measured phases.
import * as http from "node:http"
import * as net from "node:net"
import { Pool } from "undici"

export interface Counter {
  count: number
  totalMs: number
}

const bump = (map: Map<string, Counter>, key: string, ms: number) => {
  const c = map.get(key) ?? { count: 0, totalMs: 0 }
  c.count++
  c.totalMs += ms
  map.set(key, c)
}

export interface PgStats {
  /** Simple queries ('Q') plus extended-protocol syncs ('S'): one client/server round trip each. */
  roundTrips: number
  /** Statements executed (simple queries + Execute messages). */
  statements: number
  transactions: number
  /** Sum of the time between a round trip's last client message and the server's ReadyForQuery. */
  waitMs: number
  readonly byStatement: Map<string, Counter>
}

export interface CountingProxy<S> {
  readonly url: string
  readonly stats: () => S
  readonly reset: () => void
  readonly close: () => Promise<void>
}

const normalise = (sqlText: string) => sqlText.replace(/\s+/g, " ").trim().slice(0, 140)

/** Reads a NUL-terminated string at `offset`. */
const cstring = (buf: Buffer, offset: number): { readonly text: string; readonly end: number } => {
  const end = buf.indexOf(0, offset)
  const stop = end < 0 ? buf.length : end
  return { text: buf.toString("utf8", offset, stop), end: stop + 1 }
}

/** A TCP proxy to PostgreSQL at `upstreamPort` that counts what goes over the wire. */
export const startPgProxy = async (upstreamHost: string, upstreamPort: number): Promise<CountingProxy<PgStats>> => {
  const fresh = (): PgStats => ({ roundTrips: 0, statements: 0, transactions: 0, waitMs: 0, byStatement: new Map() })
  let stats = fresh()
  const sockets = new Set<net.Socket>()

  const server = net.createServer((client) => {
    const upstream = net.connect(upstreamPort, upstreamHost)
    sockets.add(client)
    sockets.add(upstream)
    client.setNoDelay(true)
    upstream.setNoDelay(true)
    const pending: Array<{ readonly at: number; readonly statement: string | undefined }> = []
    let lastParsed: string | undefined
    let inBuf: Buffer = Buffer.alloc(0)
    let startup = true
    let outBuf: Buffer = Buffer.alloc(0)
    let expectSslByte = false

    const onClientMessage = (type: string, body: Buffer) => {
      if (type === "Q") {
        const text = normalise(cstring(body, 0).text)
        stats.roundTrips++
        stats.statements++
        if (/^(BEGIN|START TRANSACTION)/i.test(text)) stats.transactions++
        pending.push({ at: performance.now(), statement: text })
      } else if (type === "P") {
        const name = cstring(body, 0)
        lastParsed = normalise(cstring(body, name.end).text)
        if (/^(BEGIN|START TRANSACTION)/i.test(lastParsed)) stats.transactions++
      } else if (type === "E") {
        stats.statements++
      } else if (type === "S") {
        stats.roundTrips++
        pending.push({ at: performance.now(), statement: lastParsed })
        lastParsed = undefined
      }
    }

    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk)
      inBuf = inBuf.length === 0 ? chunk : Buffer.concat([inBuf, chunk])
      for (;;) {
        if (startup) {
          if (inBuf.length < 8) break
          const len = inBuf.readInt32BE(0)
          if (inBuf.length < len) break
          const code = inBuf.readInt32BE(4)
          inBuf = inBuf.subarray(len)
          if (code === 80877103 || code === 80877104) expectSslByte = true // SSL/GSS request: a 1-byte answer, then startup again
          else startup = false
          continue
        }
        if (inBuf.length < 5) break
        const len = inBuf.readInt32BE(1)
        if (inBuf.length < 1 + len) break
        onClientMessage(String.fromCharCode(inBuf[0] ?? 0), inBuf.subarray(5, 1 + len))
        inBuf = inBuf.subarray(1 + len)
      }
    })

    upstream.on("data", (chunk: Buffer) => {
      client.write(chunk)
      outBuf = outBuf.length === 0 ? chunk : Buffer.concat([outBuf, chunk])
      if (expectSslByte && outBuf.length >= 1) {
        outBuf = outBuf.subarray(1)
        expectSslByte = false
      }
      for (;;) {
        if (outBuf.length < 5) break
        const len = outBuf.readInt32BE(1)
        if (outBuf.length < 1 + len) break
        if (outBuf[0] === 0x5a /* Z: ReadyForQuery */) {
          const sent = pending.shift()
          if (sent !== undefined) {
            const ms = performance.now() - sent.at
            stats.waitMs += ms
            bump(stats.byStatement, sent.statement ?? "(sync)", ms)
          }
        }
        outBuf = outBuf.subarray(1 + len)
      }
    })

    const closeBoth = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on("close", closeBoth)
    upstream.on("close", closeBoth)
    client.on("error", closeBoth)
    upstream.on("error", closeBoth)
  })

  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve(typeof address === "object" && address !== null ? address.port : 0)
    })
  })
  return {
    url: `127.0.0.1:${port}`,
    stats: () => stats,
    reset: () => {
      stats = fresh()
    },
    close: (() => {
      let closing: Promise<void> | undefined
      return () =>
        (closing ??= new Promise<void>((resolve) => {
          for (const s of sockets) s.destroy()
          server.close(() => resolve())
        }))
    })()
  }
}

export interface RpcStats {
  calls: number
  /** HTTP requests (a JSON-RPC batch is one request of several calls). */
  requests: number
  /** Summed time of the HTTP exchanges with the node (a batch counts once here). */
  waitMs: number
  readonly byMethod: Map<string, Counter>
}

/** An HTTP proxy to a JSON-RPC endpoint that counts calls per method. */
export const startRpcProxy = async (upstream: string): Promise<CountingProxy<RpcStats>> => {
  const fresh = (): RpcStats => ({ calls: 0, requests: 0, waitMs: 0, byMethod: new Map() })
  let stats = fresh()
  const target = new URL(upstream)
  const pool = new Pool(target.origin, { connections: 256, pipelining: 1 })
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const body = Buffer.concat(chunks)
      let methods: Array<string> = []
      try {
        const parsed: unknown = JSON.parse(body.toString("utf8"))
        const list = Array.isArray(parsed) ? parsed : [parsed]
        methods = list.map((m: unknown) =>
          typeof m === "object" && m !== null && "method" in m && typeof m.method === "string" ? m.method : "(unknown)")
      } catch {
        methods = ["(unparsable)"]
      }
      const started = performance.now()
      pool
        .request({ path: target.pathname, method: "POST", headers: { "content-type": "application/json" }, body })
        .then(async (response) => {
          const text = await response.body.text()
          const ms = performance.now() - started
          stats.calls += methods.length
          stats.requests += 1
          stats.waitMs += ms
          for (const m of methods) bump(stats.byMethod, m, ms)
          res.writeHead(response.statusCode, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
          res.end(text)
        })
        .catch((error: unknown) => {
          res.writeHead(502, { "content-type": "text/plain" })
          res.end(String(error))
        })
    })
  })
  server.keepAliveTimeout = 60_000
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve(typeof address === "object" && address !== null ? address.port : 0)
    })
  })
  return {
    url: `http://127.0.0.1:${port}`,
    stats: () => stats,
    reset: () => {
      stats = fresh()
    },
    close: (() => {
      let closing: Promise<void> | undefined
      return () =>
        (closing ??= (async () => {
          server.closeAllConnections()
          await new Promise<void>((resolve) => server.close(() => resolve()))
          await pool.close()
        })())
    })()
  }
}
