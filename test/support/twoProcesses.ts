// The service as deployed with WEB_CONCURRENCY=2 (the start script: a primary and two workers on one port, the test's
// database and the run's devnet), shared by the tests of one file, and requests that reach both workers: each on a
// fresh connection (node:cluster hands connections out round-robin), each named by an X-Request-Id whose log line
// says which worker answered.
import { randomUUID } from "node:crypto"
import { Effect, Exit, Scope } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { call, type Envelope, paidCall } from "./clients.js"
import { registration } from "./fixtures.js"
import { PROCESS_OPERATOR_TOKEN, sharedSettings } from "./processes.js"
import { echoCapability } from "./scenario.js"
import { type ServerProcess, serverProcess } from "./servers.js"

/** How fresh every read must be through every process after a change (issue 25). */
export const FRESH_MS = 1_000

export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: Envelope
}

export interface Cluster {
  readonly server: ServerProcess
  readonly workers: ReadonlyArray<number>
  readonly query: <R extends Record<string, unknown>>(text: string, values?: ReadonlyArray<unknown>) => Promise<Array<R>>
  /** A request on a new connection. */
  readonly call: (path: string, init?: { method?: string; json?: unknown; headers?: Record<string, string> }) => Promise<Answer>
  /** A request paid by `payer` with the official x402 client, on new connections. */
  readonly paid: (payer: PrivateKeyAccount, path: string, init?: { json?: unknown; headers?: Record<string, string> }) => Promise<Answer>
  /** The pid of the worker that answered the request with this X-Request-Id (from its log line). */
  readonly servedBy: (requestId: string) => Promise<number>
  readonly stop: () => Promise<void>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Starts the service with two workers; `stop` (also on a failed start) kills the primary and both workers. */
export const startCluster = async (extra: Record<string, string> = {}): Promise<Cluster> => {
  const scope = Effect.runSync(Scope.make())
  const workers: Array<number> = []
  const stop = async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    // The workers exit when the primary's IPC channel closes; make sure of it.
    for (const pid of workers) if (alive(pid)) process.kill(pid, "SIGKILL")
  }
  try {
    const { env, query } = await Effect.runPromise(Scope.extend(sharedSettings({ WEB_CONCURRENCY: "2", LOG_FORMAT: "json", ...extra }), scope))
    const server = await Effect.runPromise(Scope.extend(serverProcess(env), scope))
    const deadline = Date.now() + 60_000
    for (;;) {
      const pids = /server workers listening on \S+ \(primary pid \d+, worker pids ([\d, ]+)\)/.exec(server.output())?.[1]
      if (pids !== undefined) {
        workers.push(...pids.split(", ").map(Number))
        break
      }
      if (Date.now() > deadline) throw new Error(`the workers did not listen within 60 s:\n${server.output()}`)
      await sleep(50)
    }
    let paidCalls = 0
    const fresh = (headers: Record<string, string> = {}) => ({ connection: "close", "x-request-id": `two-${randomUUID()}`, ...headers })
    const servedBy = async (requestId: string) => {
      const until = Date.now() + 5_000
      for (;;) {
        for (const line of server.output().split("\n")) {
          if (!line.includes(requestId) || !line.startsWith("{")) continue
          const record = JSON.parse(line) as { requestId?: string; pid?: number; route?: string }
          if (record.requestId === requestId && record.route !== undefined && record.pid !== undefined) return record.pid
        }
        if (Date.now() > until) throw new Error(`no log line for request ${requestId}`)
        await sleep(20)
      }
    }
    return {
      server,
      workers,
      query: (text, values = []) => Effect.runPromise(query(text, values)),
      call: (path, init = {}) =>
        call(`${server.baseUrl}${path}`, {
          method: init.method ?? (init.json === undefined ? "GET" : "POST"),
          ...(init.json === undefined ? {} : { json: init.json }),
          headers: fresh(init.headers)
        }),
      paid: async (payer, path, init = {}) => {
        // A paid call is two connections (the 402, then the paid retry): with connections handed out in turn, every paid
        // retry would reach the same worker. Every other call, one more connection first moves it to the other worker.
        if (paidCalls++ % 2 === 1) await call(`${server.baseUrl}/health`, { headers: fresh() })
        return paidCall(payer, `${server.baseUrl}${path}`, { ...(init.json === undefined ? {} : { json: init.json }), headers: fresh(init.headers) })
      },
      servedBy,
      stop
    }
  } catch (error) {
    await stop()
    throw error
  }
}

export const OPERATOR = { authorization: `Bearer ${PROCESS_OPERATOR_TOKEN}`, "x-operator": "two-process test" }

/** A paid registration of an echo agent at `url`; `premium` pins the tier (earnings released at once). */
export const registerThrough = async (cluster: Cluster, owner: PrivateKeyAccount, url: string, options: { premium?: boolean; basePrice?: string } = {}) => {
  const capability = echoCapability(options.basePrice === undefined ? {} : { pricing: { model: "per-request", basePrice: options.basePrice, currency: "USDC" } })
  const created = await cluster.paid(owner, "/api/v1/agents", { json: registration(owner, { capabilities: [capability], endpoints: { execution: url } }) })
  if (created.status !== 201) throw new Error(`registration failed: ${JSON.stringify(created.body)}`)
  const id = String(created.body.data.id)
  if (options.premium === true) {
    const pinned = await cluster.call(`/api/v1/operator/agents/${id}/trust-tier`, { json: { tier: "premium", reason: "test" }, headers: OPERATOR })
    if (pinned.status !== 200) throw new Error(`pinning the tier failed: ${JSON.stringify(pinned.body)}`)
  }
  return id
}

/** An agent's standing rather than its whole profile, in failure messages. */
const brief = (data: unknown) => {
  if (typeof data !== "object" || data === null || !("reputation_score" in data)) return data
  const { reputation_score, health_score, status, trustTier } = data as Record<string, unknown>
  return { reputation_score, health_score, status, trustTier }
}

/**
 * Reads `path` on new connections until each worker has answered a read that `check` accepts, and fails when that takes
 * longer than `ms` (FRESH_MS: the bound of issue 25) from the call. Returns what each worker answered last.
 */
export const seenByEach = async (cluster: Cluster, path: string, check: (answer: Answer) => boolean, ms = FRESH_MS) => {
  const started = Date.now()
  const last = new Map<number, Answer>()
  const good = new Set<number>()
  for (;;) {
    const requestId = `read-${randomUUID()}`
    const answer = await cluster.call(path, { headers: { "x-request-id": requestId } })
    const pid = await cluster.servedBy(requestId)
    last.set(pid, answer)
    if (check(answer)) good.add(pid)
    else good.delete(pid)
    if (cluster.workers.every((w) => good.has(w))) return { ms: Date.now() - started, last }
    if (Date.now() - started > ms) {
      const seen = [...last].map(([p, a]) => `worker ${p}: ${JSON.stringify(brief(a.body.data ?? a.body.error)).slice(0, 400)}`).join("\n")
      throw new Error(`${path}: not seen by every worker within ${ms} ms\n${seen}`)
    }
  }
}

/** Reads an agent until each worker answers it from its cache (so that a stale cache would show after a change). */
export const readOnEach = (cluster: Cluster, path: string) =>
  seenByEach(cluster, path, (a) => a.status === 200 && a.body.meta?.cacheSource === "memory", 10_000)

/** Polls `read` in real time until `done`, for up to `ms` (waits for workers that run on their own clocks). */
export const until = async <A>(read: () => Promise<A>, done: (a: A) => boolean, ms: number, what: string) => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (last: ${JSON.stringify(value, (_, v) => (typeof v === "bigint" ? String(v) : v))})`)
    await sleep(100)
  }
}
