// Issue 26 item 5: the database dies under the service. Its own embedded PostgreSQL killed (SIGKILL of the postmaster):
// the server exits non-zero at once and `npm start`'s supervisor starts it again, PostgreSQL included, on the same port
// with the same data. An external DATABASE_URL that dies: the service stays up and answers 503 (a managed database
// that blips must not take the service down with it).
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { beforeAll, inject } from "vitest"
import { startEmbeddedPostgres } from "../../layers/embeddedPostgres.js"
import { EMBEDDED_POSTGRES_DIED_EXIT } from "../../layers/Pg.js"
import { call, devAccount } from "../support/clients.js"
import { PROCESS_OPERATOR_TOKEN, postgresServing, registerAgentAt, tempDataDir, untilProcesses } from "../support/processes.js"
import { childrenOf, ensureBundle, serverPidOf, serverProcess, untilHealthy } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)

/** Live postgres processes whose parent is `ppid` (a postmaster's parent is the server that started it). */
const postmastersOf = (ppid: number) =>
  childrenOf(ppid).filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      return stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) === "postgres" && !/^[ZX]/.test(stat.slice(stat.lastIndexOf(")") + 2))
    } catch {
      return false
    }
  })


const health = (baseUrl: string) =>
  Effect.promise(() => call(`${baseUrl}/health`).then((r) => r.status).catch(() => 0))

/**
 * The service on its own embedded PostgreSQL (the run's devnet): the postmaster is SIGKILLed, and a new server (the
 * supervisor's), not the old one limping on, must answer healthy with the data within 15 s.
 */
const embeddedDies = (extra: Record<string, string>) =>
  Effect.gen(function* () {
    const dataDir = yield* tempDataDir("marketplace-pgdeath-")
    yield* Effect.addFinalizer(() => Effect.sync(() => postgresServing(dataDir).forEach((pid) => process.kill(pid, "SIGKILL"))))
    const server = yield* serverProcess({ DATA_DIR: dataDir, DEVNET_RPC_URL: inject("rpcUrl"), OPERATOR_TOKEN: PROCESS_OPERATOR_TOKEN, ...extra })
    const agentId = yield* registerAgentAt(server, devAccount(1), "http://127.0.0.1:9/x")
    const first = serverPidOf(server)!
    const [postmaster] = postmastersOf(first)
    expect(postmaster).toBeDefined()

    const killedAt = Date.now()
    process.kill(postmaster!, "SIGKILL")
    // A new server (the supervisor's), not the old one limping on, answers healthy.
    yield* untilProcesses(Effect.sync(() => serverPidOf(server)), (pid) => pid !== undefined && pid !== first, 15_000).pipe(
      Effect.zipRight(Effect.suspend(() => untilHealthy(server, 15_000 - (Date.now() - killedAt)))),
      Effect.tapDefect(() => Effect.sync(() => console.log(`the service's output:\n${server.output().slice(-4_000)}`)))
    )
    const backMs = Date.now() - killedAt
    console.log(`postgres death (${JSON.stringify(extra)}): healthy again ${backMs} ms after the postmaster was killed`)
    expect(backMs).toBeLessThan(15_000)
    expect(server.output()).toContain(`the embedded PostgreSQL died (signal SIGKILL); exiting with code ${EMBEDDED_POSTGRES_DIED_EXIT}`)
    expect(server.output()).toContain(`died (exit code ${EMBEDDED_POSTGRES_DIED_EXIT})`)

    // Same data: the agent registered before the kill, in the cluster PostgreSQL recovered from its WAL.
    const read = yield* Effect.promise(() => call(`${server.baseUrl}/api/v1/agents/${agentId}`))
    expect(read.status).toBe(200)
    expect(read.body.data).toMatchObject({ id: agentId })
    expect(postmastersOf(serverPidOf(server)!)).toHaveLength(1)
  })

describe("the database dies under the service", () => {
  it.scopedLive("the embedded PostgreSQL SIGKILLed: the server exits non-zero and the supervisor has it back healthy on its port with its data within 15 s", () =>
    embeddedDies({}), { timeout: 120_000 })

  it.scopedLive("WEB_CONCURRENCY=2: the primary's embedded PostgreSQL SIGKILLed: the primary exits non-zero, its workers with it, and all are back within 15 s", () =>
    embeddedDies({ WEB_CONCURRENCY: "2" }), { timeout: 120_000 })

  it.scopedLive("an external DATABASE_URL whose server is SIGKILLed: the service stays up and answers 503, it does not exit", () =>
    Effect.gen(function* () {
      const dir = yield* tempDataDir("marketplace-pgexternal-")
      const pg = yield* Effect.acquireRelease(
        Effect.promise(() => startEmbeddedPostgres({ databaseDir: join(dir, "pg"), persistent: false, unsafeFast: true, database: "external" })),
        (pg) => Effect.promise(() => pg.stop().catch(() => undefined))
      )
      const server = yield* serverProcess({
        DATA_DIR: dir, DATABASE_URL: pg.url, DEVNET_RPC_URL: inject("rpcUrl"), OPERATOR_TOKEN: PROCESS_OPERATOR_TOKEN,
        DATABASE_QUERY_TIMEOUT_MS: "1000", DATABASE_CONNECT_TIMEOUT_MS: "1000"
      })
      const serverPid = serverPidOf(server)!
      const postmaster = Number(readFileSync(join(pg.databaseDir, "postmaster.pid"), "utf8").split("\n")[0])
      process.kill(postmaster, "SIGKILL")
      yield* untilProcesses(health(server.baseUrl), (status) => status === 503, 10_000)
      // Well past the embedded case's exit (500 ms): still the same process, still answering 503.
      const until = Date.now() + 3_000
      const statuses: Array<number> = []
      while (Date.now() < until) {
        statuses.push(yield* health(server.baseUrl))
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 200)))
      }
      expect(new Set(statuses)).toEqual(new Set([503]))
      expect(serverPidOf(server)).toBe(serverPid)
      expect(server.output()).not.toContain("embedded PostgreSQL died")
    }), { timeout: 120_000 })
})
