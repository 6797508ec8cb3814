// The fault campaign's cluster: an embedded PostgreSQL (killable and restartable, reached through a TCP hop with a fixed
// port so that the servers' DATABASE_URL survives its restart), an anvil devnet behind an RPC hop that can fail or hang,
// two independent instances of the service (each under its own supervisor, `npm start`, with its own data directory) on
// that one database and chain, and a plain round-robin balancer in front of them (X-Forwarded-*, TRUST_PROXY=true).
import { chmod, mkdtemp, rm } from "node:fs/promises"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { type Devnet, startDevnet } from "../../layers/devnet/anvil.js"
import { type EmbeddedPostgres, freePort, startEmbeddedPostgres } from "../../layers/embeddedPostgres.js"
import { baseEnv, type Child, onCleanup, spawnChild } from "../lib/children.js"
import { startEchoAgent } from "../lib/echo-agent.js"
import { BenchError, PARAMS, sleep } from "../lib/params.js"
import { processTree } from "../lib/proc.js"
import { postmasterPid, stopPostgres, waitHealthy } from "../lib/servers.js"

export type RpcMode = "pass" | "fail" | "hang"

export interface Instance {
  readonly name: string
  readonly origin: string
  /** The supervisor (`npm start`); the server it runs is its child. */
  readonly supervisor: Child
}

export interface Cluster {
  readonly tmp: string
  readonly anvilUrl: string
  readonly databaseUrl: string
  readonly balancer: string
  readonly instances: ReadonlyArray<Instance>
  readonly agentUrl: string
  readonly setRpc: (mode: RpcMode) => void
  /** kill -9 of the postmaster and its backends. */
  readonly killPostgres: () => void
  readonly restartPostgres: () => Promise<void>
  /** The server processes under an instance's supervisor. */
  readonly serverPids: (instance: Instance) => ReadonlyArray<number>
}

/** A TCP hop on a fixed port to whatever port the current PostgreSQL listens on; its connections die with it. */
const tcpHop = async (upstream: () => number) => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const up = net.connect(upstream(), "127.0.0.1")
    sockets.add(client).add(up)
    const close = () => {
      client.destroy()
      up.destroy()
      sockets.delete(client)
      sockets.delete(up)
    }
    client.pipe(up).pipe(client)
    client.on("error", close).on("close", close)
    up.on("error", close).on("close", close)
  })
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  onCleanup("postgres hop", () => new Promise<void>((resolve) => {
    for (const s of sockets) s.destroy()
    server.close(() => resolve())
  }))
  return { port, dropAll: () => sockets.forEach((s) => s.destroy()) }
}

/** An HTTP hop before the chain: passes, answers 503, or holds every request until switched back. */
const rpcHop = async (upstream: string) => {
  let mode: RpcMode = "pass"
  const held = new Set<http.ServerResponse>()
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      if (mode === "fail") return void res.writeHead(503, { "content-type": "text/plain" }).end("upstream trouble")
      if (mode === "hang") {
        held.add(res)
        res.on("close", () => held.delete(res))
        return
      }
      fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body: Buffer.concat(chunks) })
        .then(async (answer) => res.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text()))
        .catch(() => res.headersSent || res.writeHead(502).end())
    })
  })
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  onCleanup("rpc hop", () => new Promise<void>((resolve) => {
    for (const r of held) r.socket?.destroy()
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return {
    url: `http://127.0.0.1:${port}`,
    setMode: (next: RpcMode) => {
      mode = next
      // Held requests are cut when the hang ends (a provider that never answered them).
      if (next !== "hang") for (const r of held) r.socket?.destroy()
    }
  }
}

/** Round robin over the instances, one request each in turn, with X-Forwarded-For/-Proto/-Host. */
export const balancer = async (origins: ReadonlyArray<string>) => {
  let next = 0
  const server = http.createServer((req, res) => {
    const target = new URL(origins[next++ % origins.length]!)
    const headers = { ...req.headers, "x-forwarded-for": req.socket.remoteAddress ?? "127.0.0.1", "x-forwarded-proto": "http", "x-forwarded-host": req.headers.host ?? "" }
    const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(res)
    })
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "application/json" }).end(JSON.stringify({ success: false, error: { code: "BAD_GATEWAY", message: "instance unreachable" } }))
      else res.destroy()
    })
    req.pipe(upstream)
  })
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  onCleanup("balancer", () => new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return `http://127.0.0.1:${port}`
}

const startInstance = async (name: string, tmp: string, env: Record<string, string>): Promise<Instance> => {
  const port = await freePort()
  const supervisor = spawnChild(name, process.execPath, ["--max-old-space-size=256", "src/tools/start.mjs"], {
    env: { ...baseEnv(), ...env, DATA_DIR: path.join(tmp, `${name}-data`), HOST: "127.0.0.1", PORT: String(port) }
  })
  onCleanup(name, () => supervisor.stop(5_000))
  const origin = `http://127.0.0.1:${port}`
  await waitHealthy(origin, supervisor, 180_000)
  return { name, origin, supervisor }
}

export const startCluster = async (options: { readonly confirmations: number }): Promise<Cluster> => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), "marketplace-chaos-"))
  await chmod(tmp, 0o755) // the postgres system user must traverse it
  onCleanup("temp dir", () => rm(tmp, { recursive: true, force: true }))
  const pgDir = path.join(tmp, "pg")
  let pg: EmbeddedPostgres = await startEmbeddedPostgres({ databaseDir: pgDir, persistent: true, database: "marketplace" })
  let pgPid = postmasterPid(pg.databaseDir)
  onCleanup("postgres", () => stopPostgres(pg, pgPid))
  const hop = await tcpHop(() => pg.port)
  const pgUrl = new URL(pg.url)
  pgUrl.port = String(hop.port)
  const devnet: Devnet = await startDevnet({ port: 0, compileCacheDir: "node_modules/.cache/test-usdc" })
  onCleanup("anvil", () => devnet.stop())
  const rpc = await rpcHop(devnet.rpcUrl)
  const agent = await startEchoAgent()
  onCleanup("agent", () => agent.close())
  const env = {
    DEVNET_RPC_URL: rpc.url,
    DATABASE_URL: pgUrl.toString(),
    OPERATOR_TOKEN: PARAMS.operatorToken,
    TRUST_PROXY: "true",
    ALLOW_PRIVATE_URLS: "true",
    CHAIN_CONFIRMATIONS: String(options.confirmations),
    // A failed call is refunded once its client's retry window closed: short, so that a round sees its refunds.
    EXECUTION_RETRY_WINDOW_SECONDS: "15",
    // Channel claims within a round (every 5 s, or once 0.05 USDC is charged), so that faults strike them too.
    CHANNEL_CLAIM_INTERVAL_SECONDS: "5",
    CHANNEL_CLAIM_AT_MICRO_USDC: "50000",
    RATE_LIMIT_AGENT_PER_WINDOW: "100000000",
    RATE_LIMIT_CLIENT_PER_WINDOW: "100000000",
    HEALTH_PROBE_INTERVAL_MS: "3600000",
    LOG_LEVEL: "warn"
  }
  // One after the other: the first runs the migrations, the second finds them done.
  const a = await startInstance("instance-a", tmp, env)
  const b = await startInstance("instance-b", tmp, env)
  return {
    tmp,
    anvilUrl: devnet.rpcUrl,
    databaseUrl: pgUrl.toString(),
    balancer: await balancer([a.origin, b.origin]),
    instances: [a, b],
    agentUrl: `http://127.0.0.1:${agent.port}/execute`,
    setRpc: rpc.setMode,
    killPostgres: () => {
      const tree = processTree(pgPid)
      for (const pid of tree.length > 0 ? tree : [pgPid]) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // already gone
        }
      }
      hop.dropAll()
    },
    restartPostgres: async () => {
      const deadline = Date.now() + 30_000
      for (;;) {
        try {
          pg = await startEmbeddedPostgres({ databaseDir: pgDir, persistent: true, database: "marketplace" })
          pgPid = postmasterPid(pg.databaseDir)
          return
        } catch (error) {
          // Its backends may still hold the shared memory for a moment after the kill.
          if (Date.now() > deadline) throw new BenchError(`postgres did not restart: ${String(error)}`)
          await sleep(500)
        }
      }
    },
    serverPids: (instance) => processTree(instance.supervisor.pid).filter((pid) => pid !== instance.supervisor.pid)
  }
}
