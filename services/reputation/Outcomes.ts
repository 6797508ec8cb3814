// Execution outcomes off the request path: each is appended as a fact in the transaction that records it (no agent-row
// lock there), and folded into its agent's reputation, health, counters and trust tier in batches by a worker (or at
// once for one agent, inside a transaction that is about to change its reputation: a rating).
import { SqlClient, type SqlError, type Statement } from "@effect/sql"
import { Clock, Config, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { TrustTier } from "../../src/domain/Agent.js"
import { newId } from "../../src/domain/Ids.js"
import { earnedTier } from "../../src/domain/Trust.js"
import { AgentCache } from "../agents/AgentCache.js"
import { fold, type Outcome } from "./folding.js"

/** An outcome to record: `scored` for a root execution, not for a chained sub-call (health and counters only). */
export interface OutcomeFact {
  readonly agentId: string
  readonly executionId: string
  readonly scored: boolean
  readonly success: boolean
  readonly at: number
}

const Fact = Schema.Struct({
  agent_id: Schema.String,
  execution_id: Schema.String,
  scored: Schema.Boolean,
  success: Schema.Boolean,
  at: Schema.DateFromString
})
const Locked = Schema.Struct({
  id: Schema.String,
  reputation_score: Schema.Number,
  health_score: Schema.Number,
  completed_executions: Schema.Number,
  failed_executions: Schema.Number,
  created_at: Schema.DateFromString,
  trust_tier: TrustTier,
  trust_tier_override: Schema.NullOr(TrustTier)
})
const Claimed = Schema.Struct({ facts: Schema.Array(Fact), agents: Schema.Array(Locked) })
const decodeClaimed = Schema.decodeUnknown(Claimed)

/** How many facts one pass folds at most. */
const PASS_LIMIT = 1_000

export class Outcomes extends Effect.Service<Outcomes>()("reputation/Outcomes", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const cache = yield* AgentCache

    /** The facts of some outcomes as one INSERT, for the transaction that records them. */
    const statement = (facts: ReadonlyArray<OutcomeFact>) =>
      sql`INSERT INTO agent_outcomes ${sql.insert(facts.map((f) => ({
        agentId: f.agentId,
        executionId: f.executionId,
        scored: f.scored,
        success: f.success,
        at: new Date(f.at)
      })))}`

    /**
     * Claims the facts `which` selects (deleting them) and locks their agents (in id order), then writes each agent's
     * new standing and its reputation events, in the caller's transaction: a fact is folded exactly once, whatever
     * process folds it. Returns what changed (its agents are dropped from this process's cache once it committed).
     */
    const claimAndFold = (which: Statement.Fragment) =>
      Effect.gen(function* () {
        const [row] = yield* sql`
          WITH claimed AS (DELETE FROM agent_outcomes WHERE ${which} RETURNING seq, agent_id, execution_id, scored, success, at),
          locked AS (
            SELECT id, reputation_score, health_score, completed_executions, failed_executions, created_at, trust_tier, trust_tier_override
            FROM agents WHERE id IN (SELECT agent_id FROM claimed) ORDER BY id FOR NO KEY UPDATE)
          SELECT (SELECT coalesce(json_agg(c ORDER BY c.seq), '[]') FROM claimed c) AS facts,
                 (SELECT coalesce(json_agg(l), '[]') FROM locked l) AS agents`
        const claimed = yield* Effect.orDie(decodeClaimed(row))
        if (claimed.facts.length === 0) return []
        const now = yield* Clock.currentTimeMillis
        const byAgent = new Map<string, Array<Outcome>>()
        for (const f of claimed.facts) {
          const list = byAgent.get(f.agent_id) ?? []
          list.push({ executionId: f.execution_id, scored: f.scored, success: f.success, at: f.at })
          byAgent.set(f.agent_id, list)
        }
        const changes = claimed.agents.flatMap((agent) => {
          const outcomes = byAgent.get(agent.id)
          if (outcomes === undefined) return []
          const folded = fold({
            reputationScore: agent.reputation_score,
            healthScore: agent.health_score,
            completedExecutions: BigInt(agent.completed_executions),
            failedExecutions: BigInt(agent.failed_executions)
          }, outcomes)
          const trustTier = earnedTier({
            completedExecutions: folded.standing.completedExecutions,
            reputationScore: folded.standing.reputationScore,
            createdAt: agent.created_at,
            trustTierOverride: agent.trust_tier_override
          }, now)
          return [{ agentId: agent.id, count: outcomes.length, ...folded, healthUpdatedAt: folded.healthUpdatedAt ?? new Date(now), trustTier, tierChanged: trustTier !== agent.trust_tier }]
        })
        const values = changes.map((c) =>
          sql`(${c.agentId}::uuid, ${c.standing.reputationScore}::int, ${c.standing.healthScore}::float8, ${c.healthUpdatedAt}::timestamptz,
               ${c.standing.completedExecutions.toString()}::bigint, ${c.standing.failedExecutions.toString()}::bigint, ${c.trustTier}::text)`)
        const events = changes.flatMap((c) =>
          c.events.map((e) => ({
            id: newId("evt"),
            agentId: c.agentId,
            eventType: e.eventType,
            scoreDelta: e.scoreDelta,
            scoreAfter: e.scoreAfter,
            details: e.eventType === "transaction_success" ? "execution completed" : "execution failed",
            executionId: e.executionId,
            createdAt: e.at
          })))
        const update = sql`UPDATE agents a SET reputation_score = v.reputation_score, health_score = v.health_score,
              health_updated_at = v.health_updated_at, completed_executions = v.completed_executions,
              failed_executions = v.failed_executions, trust_tier = v.trust_tier
            FROM (VALUES ${sql.join(", ", false)(values)})
              AS v (id, reputation_score, health_score, health_updated_at, completed_executions, failed_executions, trust_tier)
            WHERE a.id = v.id`
        if (values.length > 0) {
          yield* events.length === 0 ? update : sql`WITH u AS (${update}) INSERT INTO reputation_events ${sql.insert(events)}`
        }
        return changes
      })

    type Change = Effect.Effect.Success<ReturnType<typeof claimAndFold>>[number]

    /**
     * This process's cache drops the changed agents at once; every process (this one too) also drops them when the
     * fold's commit notifies them (migrations/0026_agent_cache_notify.sql).
     */
    const patchCaches = (changes: ReadonlyArray<Change>) => Effect.forEach(changes, (c) => cache.invalidate(c.agentId), { discard: true })

    /** One pass of the worker: folds up to PASS_LIMIT waiting facts (skipping those another process is folding). */
    const foldPending: Effect.Effect<number, SqlError.SqlError> = Effect.gen(function* () {
      const [waiting] = yield* sql<{ pending: boolean }>`SELECT EXISTS (SELECT 1 FROM agent_outcomes) AS pending`
      if (waiting?.pending !== true) return 0
      const changes = yield* sql.withTransaction(
        claimAndFold(sql`seq IN (SELECT seq FROM agent_outcomes ORDER BY seq LIMIT ${PASS_LIMIT} FOR UPDATE SKIP LOCKED)`)
      )
      yield* patchCaches(changes)
      return changes.reduce((n, c) => n + c.count, 0)
    }).pipe(Effect.withSpan("Outcomes.foldPending"))

    /** Folds every waiting fact of one agent, inside the caller's transaction (before it reads or moves the score). */
    const foldAgent = (agentId: string) =>
      Effect.flatMap(claimAndFold(sql`agent_id = ${agentId}`), patchCaches)

    /**
     * Folds every fact committed so far, waiting for a pass another fiber or process is running (tests: read a score
     * right after an execution without sleeping).
     */
    const foldAll = Effect.flatMap(sql.withTransaction(claimAndFold(sql`TRUE`)), patchCaches)

    return { statement, foldPending, foldAgent, foldAll } as const
  }),
  dependencies: [AgentCache.Default]
}) {}

/** Staleness bound of reputation, health and counters: outcomes are folded every REPUTATION_FOLD_INTERVAL_MS (docs/decisions/circuit-health-reputation.md). */
export const foldInterval = Config.integer("REPUTATION_FOLD_INTERVAL_MS").pipe(
  Config.withDefault(250),
  Config.validate({ message: "REPUTATION_FOLD_INTERVAL_MS must be between 10 and 1000", validation: (n) => n >= 10 && n <= 1_000 })
)

/** The fold worker: a pass every REPUTATION_FOLD_INTERVAL_MS (Effect clock: TestClock drives it in tests). */
export const OutcomesFoldLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const outcomes = yield* Outcomes
    const interval = yield* foldInterval
    yield* outcomes.foldPending.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("reputation fold pass failed; retried next pass", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(interval))),
      Effect.forkScoped
    )
  })
)
