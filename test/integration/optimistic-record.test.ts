// The optimistic unit of work (services/sql/UnitOfWork.ts `optimistic`): a transaction's steps read their rows without
// locks and write as ONE guarded statement; a row changed in between (a timer, another process) or a statement it cannot
// guard sends it back to the locking path, which ends in the state the events would have left one after the other.
import { SqlClient, Statement } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber, Ref, TestClock } from "effect"
import { MachineHost } from "../../machines/Host.js"
import { optimisticCounts } from "../../services/sql/Optimistic.js"
import * as UnitOfWork from "../../services/sql/UnitOfWork.js"
import { devAccount } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const HOUR = 60 * 60 * 1000
const counts = () => ({ written: optimisticCounts.written, fellBack: optimisticCounts.fellBack })
const reason = (text: string) => optimisticCounts.reasons.get(text) ?? 0

layer(TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "60000" }))("optimistic unit of work", (it) => {
  const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

  /** n + 1 on the row 'a' of opt_items, read through a guard; `meanwhile` runs between the read and the write. */
  const increment = (meanwhile: Effect.Effect<void, unknown>) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* UnitOfWork.guardedRead(sql, (lock) => sql`SELECT id, n FROM opt_items WHERE id = 'a' ${lock ? sql`FOR UPDATE` : sql``}`)
      yield* Effect.orDie(meanwhile)
      const n = typeof row === "object" && row !== null && "n" in row && typeof row.n === "number" ? row.n : -1
      yield* UnitOfWork.update(sql, "opt_items", "a", { n: n + 1 })
    })

  it.effect("a row changed between the read and the write aborts the one statement; the locking path loses no update", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS opt_items (id text PRIMARY KEY, n int NOT NULL)`
      yield* sql`DELETE FROM opt_items`
      yield* sql`INSERT INTO opt_items (id, n) VALUES ('a', 1)`
      const before = counts()
      yield* UnitOfWork.optimistic(sql)(increment(Effect.void))
      expect(counts()).toEqual({ written: before.written + 1, fellBack: before.fellBack })
      expect(yield* sql`SELECT n FROM opt_items WHERE id = 'a'`).toEqual([{ n: 2 }])

      // Another writer commits between the read and the write, on the first attempt only (it runs outside the unit).
      const first = yield* Ref.make(true)
      const writer = Effect.flatMap(Ref.getAndSet(first, false), (isFirst) =>
        isFirst ? Effect.asVoid(Statement.withTransformerDisabled(sql`UPDATE opt_items SET n = n + 10 WHERE id = 'a'`)) : Effect.void)
      const guardFailed = reason("a guarded row changed")
      yield* UnitOfWork.optimistic(sql)(increment(writer))
      expect(counts()).toEqual({ written: before.written + 1, fellBack: before.fellBack + 1 })
      expect(reason("a guarded row changed")).toBe(guardFailed + 1)
      expect(yield* sql`SELECT n FROM opt_items WHERE id = 'a'`).toEqual([{ n: 13 }])
    }))

  it.effect("a statement the unit cannot guard (a read of its own) sends the whole unit to the locking path, run once", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE opt_items SET n = 0 WHERE id = 'a'`
      const before = counts()
      const result = yield* UnitOfWork.optimistic(sql)(Effect.gen(function* () {
        yield* increment(Effect.void)
        const [other] = yield* sql<{ one: number }>`SELECT 1 AS one`
        return other?.one
      }))
      expect(result).toBe(1)
      expect(counts()).toEqual({ written: before.written, fellBack: before.fellBack + 1 })
      expect(yield* sql`SELECT n FROM opt_items WHERE id = 'a'`).toEqual([{ n: 1 }])
    }))

  it.scoped("a paid call records its outcome as one guarded statement", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url)
      const before = counts()
      const response = yield* execute(devAccount(2), { targetAgentId: agentId, capabilityId: "echo", input: { text: "once" } })
      expect(response.status).toBe(200)
      expect(response.body.data).toMatchObject({ status: "completed", settlement: { status: "settled" } })
      expect(counts()).toEqual({ written: before.written + 1, fellBack: before.fellBack })
    }))

  it.scoped("the release timer firing between a step's read and its write: released once, through the locking path", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const host = yield* MachineHost
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), agent.url)
      const response = yield* execute(devAccount(4), { targetAgentId: agentId, capabilityId: "echo", input: { text: "race" } })
      expect(response.status).toBe(200)
      const requestId: string = response.body.data.requestId
      yield* TestClock.adjust(24 * HOUR + 1_000)
      const read = yield* Deferred.make<void>()
      const go = yield* Deferred.make<void>()
      const before = counts()
      const guardFailed = reason("a guarded row changed")
      // The release as an optimistic unit that waits, after its step, for the timer worker to release the same escrow.
      const unit = yield* Effect.fork(UnitOfWork.optimistic(sql)(Effect.gen(function* () {
        const delivered = yield* host.deliver("execution", requestId, { type: "RELEASE_DUE", at: yield* Clock.currentTimeMillis })
        yield* Deferred.succeed(read, undefined)
        yield* Deferred.await(go)
        return delivered
      })))
      yield* Deferred.await(read)
      expect(yield* host.fireDue).toBeGreaterThanOrEqual(1)
      yield* Deferred.succeed(go, undefined)
      const delivered = yield* Fiber.join(unit)
      // The locking path found the escrow released already: the event was not accepted, nothing moved twice.
      expect(delivered).toMatchObject({ _tag: "Some", value: { state: "completed.released", changed: false } })
      expect(counts()).toEqual({ written: before.written, fellBack: before.fellBack + 1 })
      expect(reason("a guarded row changed")).toBe(guardFailed + 1)
      const releases = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_transfers WHERE kind = 'escrow_release' AND subject_id = ${requestId}`
      expect(releases).toEqual([{ n: 1 }])
      const transitions = yield* sql<{ toState: string }>`
        SELECT to_state FROM machine_transitions WHERE machine = 'execution' AND actor_id = ${requestId} AND event_type = 'RELEASE_DUE'`
      expect(transitions).toEqual([{ toState: "completed.released" }])
      const [row] = yield* sql<{ state: string; escrow: string }>`
        SELECT e.state, s.status AS escrow FROM executions e JOIN escrows s ON s.execution_id = e.id WHERE e.id = ${requestId}`
      expect(row).toEqual({ state: "completed.released", escrow: "released" })
    }))
})
