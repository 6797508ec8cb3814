// Real server processes for tests: the package's start script (`node src/tools/start.mjs`, the bundle built once
// beforehand: a supervisor and its server child) with the environment a test gives it, typically one test database and
// the run's devnet; killed with the scope.
import { type ChildProcess, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { freePort } from "../../layers/embeddedPostgres.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

/** Settings a developer's shell might carry into the tests: each server gets the ones its test states. */
const SETTINGS = [
  "PORT", "HOST", "DATA_DIR", "DATABASE_URL", "CHAIN_RPC_URL", "DEVNET_RPC_URL", "DEVNET_PORT", "USDC_ADDRESS", "TREASURY_PRIVATE_KEY",
  "TREASURY_ADDRESS", "FACILITATOR_URL", "OPERATOR_TOKEN", "X402_NETWORK", "PUBLIC_BASE_URL", "BACKGROUND_WORKERS", "WEBHOOK_ATTEMPT_TIMEOUT_MS",
  "WEB_CONCURRENCY", "LOG_FORMAT", "DEVNET_SECOND_NETWORK", "DEVNET_SECOND_RPC_URL", "ETHEREUM_RPC_URL", "ETHEREUM_USDC_ADDRESS",
  "ETHEREUM_SETTLEMENT_BATCHER_ADDRESS", "ETHEREUM_CONFIRMATIONS"
]
const inheritedEnv = () => Object.fromEntries(Object.entries(process.env).filter(([name]) => !SETTINGS.includes(name)))

export interface ServerProcess {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly output: () => string
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  /** Every `/health` status the start-up wait read once the server answered ("ok", "degraded", ...), in order. */
  readonly healthSeen: Array<string>
}

/** Builds the bundle the start script runs, when a source changed (once per run, before timed tests). */
export const ensureBundle = () =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", "await (await import('./src/tools/build.mjs')).ensureBuilt()"], { cwd: root, stdio: ["ignore", "ignore", "pipe"] })
    let err = ""
    child.stderr.on("data", (c: Buffer) => (err += c.toString("utf8")))
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`bundle build failed (${code}): ${err}`))))
  })

const launch = (port: number, env: Record<string, string>): ServerProcess => {
  const child = spawn(process.execPath, ["src/tools/start.mjs"], {
    cwd: root,
    env: { ...inheritedEnv(), HOST: "127.0.0.1", PORT: String(port), ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  child.stdout?.on("data", (c: Buffer) => (out += c.toString("utf8")))
  child.stderr?.on("data", (c: Buffer) => (out += c.toString("utf8")))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
  return { child, baseUrl: `http://127.0.0.1:${port}`, output: () => out, exited, healthSeen: [] }
}

/** Polls /health until "ok" (within `ms`); fails at once if the process exits. */
const healthy = async (server: ServerProcess, ms: number) => {
  let exited = false
  void server.exited.then(() => (exited = true))
  const deadline = Date.now() + ms
  for (;;) {
    if (exited) throw new Error(`the server exited before it was healthy:\n${server.output()}`)
    if (Date.now() > deadline) throw new Error(`the server was not healthy within ${ms} ms:\n${server.output()}`)
    const status = await fetch(`${server.baseUrl}/health`, { signal: AbortSignal.timeout(2_000) })
      .then(async (r) => (r.ok ? ((await r.json()) as { data?: { status?: string } }).data?.status : undefined))
      .catch(() => undefined)
    if (status !== undefined) server.healthSeen.push(status)
    if (status === "ok") return
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** The children of `pid` (from /proc). */
export const childrenOf = (pid: number): Array<number> =>
  readdirSync("/proc").filter((e) => /^\d+$/.test(e)).flatMap((entry) => {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid ? [Number(entry)] : []
    } catch {
      return []
    }
  })

/** The server the start script's supervisor runs (its one child), if any. */
export const serverPidOf = (server: ServerProcess): number | undefined => childrenOf(server.child.pid ?? 0)[0]

/**
 * kill -9 of the service: the supervisor is frozen first (it must not restart anything), then the server's process
 * group (the server and what it started) and the supervisor are SIGKILLed. Nothing of their own shutdown runs.
 */
const killAll = async (server: ServerProcess) => {
  const supervisor = server.child.pid
  if (supervisor === undefined || server.child.exitCode !== null || server.child.signalCode !== null) return await server.exited
  try {
    process.kill(supervisor, "SIGSTOP")
    const pid = serverPidOf(server)
    if (pid !== undefined) process.kill(-pid, "SIGKILL")
  } catch {
    // already gone
  }
  server.child.kill("SIGKILL")
  return await server.exited
}

/** A healthy server process with `env` on a free port; SIGKILLed when the scope closes if it still runs. */
export const serverProcess = (env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const server = launch(await freePort(), env)
      await healthy(server, 60_000).catch(async (error: unknown) => {
        await killAll(server)
        throw error
      })
      return server
    }),
    (server) => Effect.promise(() => killAll(server))
  )

/** kill -9: nothing of the process's own shutdown runs (its leases, in-flight posts and connections are abandoned). */
export const killHard = (server: ServerProcess) => Effect.promise(() => killAll(server))

/** Polls /health until "ok" (within `ms`), as at start. */
export const untilHealthy = (server: ServerProcess, ms: number) => Effect.promise(() => healthy(server, ms))
