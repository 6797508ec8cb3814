// What tests of real server processes share: one test database and data directory for all the processes of a test
// (with a direct connection to inspect it), a paid agent registration through a process, and real-time polling.
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { chmod, mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { call, paidCall } from "./clients.js"
import { registration } from "./fixtures.js"
import { freshDatabase } from "./harness.js"
import { echoCapability } from "./scenario.js"
import type { ServerProcess } from "./servers.js"

export const PROCESS_OPERATOR_TOKEN = "process-test-operator-token-0123456789"

/** Rows a crash can leave open (payments, executions, escrows, refunds, treasury transactions): `n`, 0 once all finished. */
export const UNFINISHED = `
  SELECT (SELECT count(*) FROM payments WHERE status IN ('reserved', 'retrying'))::int
       + (SELECT count(*) FROM executions WHERE status = 'pending')::int
       + (SELECT count(*) FROM escrows WHERE status IN ('held', 'refunding'))::int
       + (SELECT count(*) FROM refunds WHERE status IN ('pending', 'submitted'))::int
       + (SELECT count(*) FROM treasury_txs WHERE state IN ('signed', 'broadcast'))::int AS n`

/** A data directory for a server process (the postgres system user must traverse it), removed with the scope. */
export const tempDataDir = (prefix = "marketplace-processes-") =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const dir = await mkdtemp(join(tmpdir(), prefix))
      await chmod(dir, 0o755)
      return dir
    }),
    (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
  )

/** A plain pg connection for the test's own reads, closed with its scope. */
export const pgConnection = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const c = new pg.Client(url)
      await c.connect()
      return c
    }),
    (c) => Effect.promise(() => c.end())
  )

/** One test database, a data directory, and the settings every server process of the test shares. */
/**
 * A connection to a service's own embedded PostgreSQL (its port in postmaster.pid, its password beside the cluster).
 * A kill of the host takes the database with it: the connection's end is then expected, not an error.
 */
export const embeddedDatabase = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const port = Number(readFileSync(join(dataDir, "postgres", "postmaster.pid"), "utf8").split("\n")[3])
      const password = readFileSync(join(dataDir, "postgres.password"), "utf8").trim()
      const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", password, database: "marketplace" })
      client.on("error", () => undefined)
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  )

export const sharedSettings = (extra: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const db = yield* freshDatabase
    const dataDir = yield* tempDataDir()
    const client = yield* pgConnection(db.url)
    const query = <R extends pg.QueryResultRow>(text: string, values: ReadonlyArray<unknown> = []) =>
      Effect.promise(() => client.query<R>(text, [...values]).then((r) => r.rows))
    return { env: { DATABASE_URL: db.url, DEVNET_RPC_URL: inject("rpcUrl"), DATA_DIR: dataDir, OPERATOR_TOKEN: PROCESS_OPERATOR_TOKEN, ...extra }, query }
  })

/** A paid registration of an instant-release (premium) agent with `capabilities` (an echo capability) at `url`. */
export const registerAgentAt = (server: ServerProcess, owner: PrivateKeyAccount, url: string, capabilities: ReadonlyArray<unknown> = [echoCapability()]) =>
  Effect.promise(async () => {
    const created = await paidCall(owner, `${server.baseUrl}/api/v1/agents`, { json: registration(owner, { capabilities, endpoints: { execution: url } }) })
    if (created.status !== 201) throw new Error(`registration failed: ${JSON.stringify(created.body)}`)
    const id = String(created.body.data.id)
    const pinned = await call(`${server.baseUrl}/api/v1/operator/agents/${id}/trust-tier`, {
      method: "POST",
      json: { tier: "premium", reason: "test" },
      headers: { authorization: `Bearer ${PROCESS_OPERATOR_TOKEN}`, "x-operator": "test" }
    })
    if (pinned.status !== 200) throw new Error(`pinning the tier failed: ${JSON.stringify(pinned.body)}`)
    return id
  })

/** Polls `effect` in real time (the servers run on their own clocks) until `done`, for up to `ms`. */
export const untilProcesses = <A>(effect: Effect.Effect<A>, done: (a: A) => boolean, ms: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    for (;;) {
      const value = yield* effect
      if (done(value)) return value
      if (Date.now() > deadline) return yield* Effect.dieMessage(`not within ${ms} ms: ${JSON.stringify(value)}`)
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
    }
  })

/** Every postgres process serving `dataDir` (orphans included): killed when a test fails half way. */
export const postgresServing = (dataDir: string) =>
  readdirSync("/proc").filter((e) => /^\d+$/.test(e)).flatMap((entry) => {
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, "utf8")
      return args.includes("postgres") && args.includes(dataDir) ? [Number(entry)] : []
    } catch {
      return []
    }
  })
