// A JSON-RPC proxy on loopback in front of an anvil, switchable to misbehave like a flaky provider: 429 with
// Retry-After, 5xx, hanging (no answer until switched back or closed), stale heads, and "lost answers" to
// eth_sendRawTransaction (forwarded to anvil, then the caller sees a 502 or a dropped connection). Counts requests per method.
import { Effect } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export type ProxyMode =
  | { readonly _tag: "pass" }
  | { readonly _tag: "429"; readonly retryAfterSeconds: number }
  | { readonly _tag: "5xx"; readonly status: number }
  | { readonly _tag: "hang" }
  /** eth_blockNumber and "latest" block reads answer this old block; everything else passes. */
  | { readonly _tag: "stale"; readonly block: bigint }

export interface RpcProxy {
  readonly url: string
  readonly setMode: (mode: ProxyMode) => void
  /**
   * A burst: the next `requests` requests (of `methods` only, when given) get `mode`, then the proxy passes again
   * (no timers: counted requests).
   */
  readonly burst: (mode: ProxyMode, requests: number, methods?: ReadonlyArray<string>) => void
  /** The next `times` eth_sendRawTransaction calls reach anvil, then the caller gets a 502 ("502") or a reset ("drop"). */
  readonly loseSendAnswers: (times: number, how: "502" | "drop") => void
  /** Requests seen per JSON-RPC method (every request, whatever the mode). */
  readonly counts: () => Readonly<Record<string, number>>
  /** eth_sendRawTransaction calls forwarded whose answer the caller never saw. */
  readonly lostSends: () => number
}

export interface RpcCall { readonly id?: unknown; readonly method?: string; readonly params?: ReadonlyArray<unknown> }

export const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

/** The JSON-RPC calls of a body (one or a batch; none when it is not JSON). */
export const asCalls = (body: string): ReadonlyArray<RpcCall> => {
  try {
    const parsed: unknown = JSON.parse(body)
    const list = Array.isArray(parsed) ? parsed : [parsed]
    return list.filter((c): c is RpcCall => typeof c === "object" && c !== null)
  } catch {
    return []
  }
}

const hex = (n: bigint) => `0x${n.toString(16)}`

/** Starts the proxy (scoped: closed, and every hanging answer released, with the scope). */
export const rpcProxy = (upstream: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      let mode: ProxyMode = { _tag: "pass" }
      let burstLeft = 0
      let burstMethods: ReadonlyArray<string> | undefined
      let lose: { times: number; how: "502" | "drop" } = { times: 0, how: "502" }
      let lost = 0
      const counts: Record<string, number> = {}
      const hanging = new Set<ServerResponse>()

      const forward = async (body: string) => {
        const answer = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body })
        return { status: answer.status, text: await answer.text() }
      }

      /** A stale node: the head is `block`, and "latest" reads are answered at that height. */
      const staleAnswer = async (call: RpcCall, block: bigint): Promise<string | undefined> => {
        if (call.method === "eth_blockNumber") return JSON.stringify({ jsonrpc: "2.0", id: call.id, result: hex(block) })
        if (call.method === "eth_getBlockByNumber" && call.params?.[0] === "latest") {
          const old = await forward(JSON.stringify({ ...call, params: [hex(block), call.params[1] ?? false] }))
          return old.text
        }
        return undefined
      }

      const server = createServer((req, res) => {
        void (async () => {
          const body = await readBody(req)
          const calls = asCalls(body)
          for (const c of calls) counts[c.method ?? "?"] = (counts[c.method ?? "?"] ?? 0) + 1
          const targeted = burstMethods === undefined || calls.some((c) => burstMethods?.includes(c.method ?? "") === true)
          const current: ProxyMode = targeted ? mode : { _tag: "pass" }
          if (targeted && burstLeft > 0 && --burstLeft === 0) {
            mode = { _tag: "pass" }
            burstMethods = undefined
          }
          if (current._tag === "hang") {
            hanging.add(res)
            res.on("close", () => hanging.delete(res))
            return
          }
          if (current._tag === "429") {
            res.writeHead(429, { "content-type": "text/plain", "retry-after": String(current.retryAfterSeconds) }).end("Too Many Requests")
            return
          }
          if (current._tag === "5xx") {
            res.writeHead(current.status, { "content-type": "text/plain" }).end("upstream trouble")
            return
          }
          const single = calls.length === 1 ? calls[0] : undefined
          if (current._tag === "stale" && single !== undefined) {
            const text = await staleAnswer(single, current.block)
            if (text !== undefined) {
              res.writeHead(200, { "content-type": "application/json" }).end(text)
              return
            }
          }
          const sending = calls.some((c) => c.method === "eth_sendRawTransaction")
          const answer = await forward(body)
          if (sending && lose.times > 0) {
            lose = { ...lose, times: lose.times - 1 }
            lost++
            if (lose.how === "drop") res.socket?.destroy()
            else res.writeHead(502, { "content-type": "text/plain" }).end("Bad Gateway")
            return
          }
          res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.text)
        })().catch(() => {
          if (!res.headersSent) res.writeHead(502).end()
        })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const address: AddressInfo | string | null = server.address()
      if (address === null || typeof address === "string") throw new Error("the RPC proxy has no TCP address")
      const port = address.port
      const release = () => {
        for (const res of hanging) res.socket?.destroy()
        hanging.clear()
      }
      const proxy: RpcProxy = {
        url: `http://127.0.0.1:${port}`,
        setMode: (next) => {
          mode = next
          burstLeft = 0
          burstMethods = undefined
          if (next._tag !== "hang") release()
        },
        burst: (next, requests, methods) => {
          mode = next
          burstLeft = requests
          burstMethods = methods
        },
        loseSendAnswers: (times, how) => {
          lose = { times, how }
        },
        counts: () => ({ ...counts }),
        lostSends: () => lost
      }
      return { server, proxy, release }
    }),
    ({ release, server }) =>
      Effect.promise(() => {
        release()
        server.closeAllConnections()
        return new Promise<void>((resolve) => server.close(() => resolve()))
      })
  ).pipe(Effect.map(({ proxy }) => proxy))
