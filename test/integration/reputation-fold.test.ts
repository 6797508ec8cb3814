// Execution outcomes off the request path (issue 13): a paid call records its outcome as a fact without locking its
// agent's row, and the fold worker turns facts into reputation, health, counters and events exactly once, however many
// passes run at the same time.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import pg from "pg"
import { Outcomes } from "../../services/reputation/Outcomes.js"
import { call, devAccount } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const standing = (agentId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ reputationScore: number; healthScore: number; completedExecutions: string; failedExecutions: string }>`
      SELECT reputation_score, health_score, completed_executions::text, failed_executions::text FROM agents WHERE id = ${agentId}`.pipe(
      Effect.map((rows) => rows[0]),
      Effect.orDie
    ))

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { excludeTestServices: true })("reputation fold", (it) => {
  it.scoped("a paid call completes while another transaction holds its agent's row lock; its outcome counts once folded, and only once", () =>
    Effect.gen(function* () {
      const { sql, databaseUrl } = yield* TestEnv
      const outcomes = yield* Outcomes
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      // What a fold pass or a rating takes on the agent's row, held by another connection during the whole call.
      const holder = new pg.Client(databaseUrl)
      yield* Effect.acquireRelease(Effect.promise(() => holder.connect()), () => Effect.promise(() => holder.end()))
      yield* Effect.promise(() => holder.query("BEGIN"))
      yield* Effect.promise(() => holder.query("SELECT 1 FROM agents WHERE id = $1 FOR NO KEY UPDATE", [agentId]))
      const response = yield* execute(devAccount(2), { targetAgentId: agentId, capabilityId: "echo", input: { text: "hi" } }).pipe(
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("the paid call waited on the agent's row lock") }),
        Effect.orDie
      )
      expect(response.status).toBe(200)
      expect(response.body.data).toMatchObject({ status: "completed", settlement: { status: "settled" } })
      yield* Effect.promise(() => holder.query("ROLLBACK"))

      // Recorded, not yet counted.
      const facts = yield* sql<{ scored: boolean; success: boolean }>`SELECT scored, success FROM agent_outcomes WHERE agent_id = ${agentId}`
      expect(facts).toEqual([{ scored: true, success: true }])
      expect(yield* standing(agentId)).toMatchObject({ reputationScore: 50, completedExecutions: "0" })

      expect(yield* outcomes.foldPending).toBe(1)
      expect(yield* standing(agentId)).toEqual({ reputationScore: 51, healthScore: 1, completedExecutions: "1", failedExecutions: "0" })
      expect(yield* sql`SELECT 1 FROM agent_outcomes WHERE agent_id = ${agentId}`).toEqual([])
      // A second pass finds nothing to fold.
      expect(yield* outcomes.foldPending).toBe(0)
      const events = yield* sql<{ eventType: string; scoreAfter: number }>`SELECT event_type, score_after FROM reputation_events WHERE agent_id = ${agentId}`
      expect(events).toEqual([{ eventType: "transaction_success", scoreAfter: 51 }])
      // The cached agent follows the fold at once.
      const { baseUrl } = yield* TestEnv
      const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${agentId}`))
      expect(read.body.data).toMatchObject({ reputation_score: 51, health_score: 1 })
    }))

  it.scoped("concurrent fold passes apply each of 301 outcomes exactly once, in order, clamped at 0 and 100", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const outcomes = yield* Outcomes
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), agent.url, { tier: "premium" })
      const paid = yield* execute(devAccount(4), { targetAgentId: agentId, capabilityId: "echo", input: { text: "hi" } })
      expect(paid.status).toBe(200)
      const executionId: string = paid.body.data.requestId
      // After the paid call's success: 60 successes (51 → 100, then clamped), 100 failures (100 → 0, then clamped),
      // 140 chained sub-calls (health and counters only).
      const facts = [
        ...Array.from({ length: 60 }, () => ({ scored: true, success: true })),
        ...Array.from({ length: 100 }, () => ({ scored: true, success: false })),
        ...Array.from({ length: 140 }, (_, i) => ({ scored: false, success: i % 2 === 0 }))
      ]
      yield* sql`INSERT INTO agent_outcomes ${sql.insert(facts.map((f, i) => ({
        agentId,
        executionId,
        scored: f.scored,
        success: f.success,
        at: new Date(Date.now() + 1 + i)
      })))}`
      const folded = yield* Effect.all([outcomes.foldPending, outcomes.foldPending, outcomes.foldPending, Effect.as(outcomes.foldAll, 0)], {
        concurrency: "unbounded"
      })
      yield* outcomes.foldAll
      expect(folded.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(301)
      expect(yield* sql`SELECT 1 FROM agent_outcomes`).toEqual([])
      expect(yield* standing(agentId)).toMatchObject({ reputationScore: 0, completedExecutions: "131", failedExecutions: "170" })
      const events = yield* sql<{ scoreDelta: number; scoreAfter: number }>`
        SELECT score_delta, score_after FROM reputation_events WHERE agent_id = ${agentId} ORDER BY created_at, seq`
      expect(events).toHaveLength(161)
      expect(events.filter((e) => e.scoreDelta === 1)).toHaveLength(50)
      expect(events.filter((e) => e.scoreDelta === -2)).toHaveLength(50)
      expect(events.filter((e) => e.scoreDelta === 0)).toHaveLength(61)
      expect(events.at(49)).toEqual({ scoreDelta: 1, scoreAfter: 100 })
      expect(events.at(60)).toEqual({ scoreDelta: 0, scoreAfter: 100 })
      expect(events.at(-1)).toEqual({ scoreDelta: 0, scoreAfter: 0 })
    }))
})
