// Reputation (root executions: +1 success, -2 failure, 0-100) and health (EMA of outcomes and probes), with events per change.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { AgentProxy } from "../../layers/AgentProxy.js"
import { TrustTier } from "../../src/domain/Agent.js"
import { newId } from "../../src/domain/Ids.js"
import { earnedTier } from "../../src/domain/Trust.js"
import { AgentCache } from "../agents/AgentCache.js"

/** Weight of the newest outcome in the health EMA: health = α·outcome + (1-α)·health. */
export const HEALTH_ALPHA = 0.1
export const REPUTATION_SUCCESS = 1
export const REPUTATION_FAILURE = -2

const Updated = Schema.Struct({
  before: Schema.Number,
  after: Schema.Number,
  healthScore: Schema.Number,
  completedExecutions: Schema.BigInt,
  createdAt: Schema.DateFromSelf,
  trustTier: TrustTier,
  trustTierOverride: Schema.NullOr(TrustTier)
})

export class Reputation extends Effect.Service<Reputation>()("Reputation", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const cache = yield* AgentCache

    /**
     * One root execution's outcome; call inside the transaction that records it. Updates score, health, counters and
     * trust tier under the agent's row lock and writes the reputation event with the effective delta (clamped at 0/100).
     */
    const recordOutcome = (agentId: string, executionId: string, success: boolean) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const delta = success ? REPUTATION_SUCCESS : REPUTATION_FAILURE
        const rows = yield* sql`
          WITH old AS (SELECT id, reputation_score FROM agents WHERE id = ${agentId} FOR NO KEY UPDATE)
          UPDATE agents a SET
            reputation_score = LEAST(100, GREATEST(0, a.reputation_score + ${delta}::int)),
            health_score = ${HEALTH_ALPHA}::float8 * ${success ? 1 : 0}::float8 + ${1 - HEALTH_ALPHA}::float8 * a.health_score,
            health_updated_at = ${new Date(now)},
            completed_executions = a.completed_executions + ${success ? 1 : 0}::int,
            failed_executions = a.failed_executions + ${success ? 0 : 1}::int
          FROM old WHERE a.id = old.id
          RETURNING old.reputation_score AS before, a.reputation_score AS after, a.health_score, a.completed_executions,
                    a.created_at, a.trust_tier, a.trust_tier_override`
        if (rows[0] === undefined) return
        const updated = yield* Effect.orDie(Schema.decodeUnknown(Updated)(rows[0]))
        yield* sql`INSERT INTO reputation_events ${sql.insert({
          id: newId("evt"),
          agentId,
          eventType: success ? "transaction_success" : "transaction_fail",
          scoreDelta: updated.after - updated.before,
          scoreAfter: updated.after,
          details: success ? "execution completed" : "execution failed",
          executionId,
          createdAt: new Date(now)
        })}`
        const tier = earnedTier({ ...updated, reputationScore: updated.after }, now)
        if (tier !== updated.trustTier) yield* sql`UPDATE agents SET trust_tier = ${tier} WHERE id = ${agentId}`
        // Other processes converge within the cache TTL.
        yield* cache.patch(agentId, (agent) => ({
          ...agent,
          reputationScore: updated.after,
          healthScore: updated.healthScore,
          healthUpdatedAt: new Date(now),
          completedExecutions: updated.completedExecutions,
          trustTier: tier
        }))
      }).pipe(Effect.withSpan("Reputation.recordOutcome"))

    /**
     * A client's rating of a completed root execution: moves the score by `delta` (clamped at 0/100) under the agent's
     * row lock and writes the `rating` event; None when the execution was already rated (nothing changes). Call inside
     * the caller's transaction.
     */
    const recordRating = (agentId: string, executionId: string, delta: number, details: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const [locked] = yield* sql<{ reputationScore: number }>`SELECT reputation_score FROM agents WHERE id = ${agentId} FOR NO KEY UPDATE`
        if (locked === undefined) return Option.none()
        const after = Math.min(100, Math.max(0, locked.reputationScore + delta))
        const eventId = newId("evt")
        const inserted = yield* sql`INSERT INTO reputation_events ${sql.insert({
          id: eventId,
          agentId,
          eventType: "rating",
          scoreDelta: after - locked.reputationScore,
          scoreAfter: after,
          details,
          executionId,
          createdAt: new Date(now)
        })} ON CONFLICT (execution_id) WHERE event_type = 'rating' DO NOTHING RETURNING id`
        if (inserted.length === 0) return Option.none()
        const rows = yield* sql`
          UPDATE agents SET reputation_score = ${after} WHERE id = ${agentId}
          RETURNING ${locked.reputationScore}::int AS before, reputation_score AS after, health_score, completed_executions,
                    created_at, trust_tier, trust_tier_override`
        const updated = yield* Effect.orDie(Schema.decodeUnknown(Updated)(rows[0]))
        const tier = earnedTier({ ...updated, reputationScore: updated.after }, now)
        if (tier !== updated.trustTier) yield* sql`UPDATE agents SET trust_tier = ${tier} WHERE id = ${agentId}`
        yield* cache.patch(agentId, (agent) => ({ ...agent, reputationScore: updated.after, trustTier: tier }))
        return Option.some({ eventId, scoreDelta: updated.after - updated.before, score: updated.after })
      }).pipe(Effect.withSpan("Reputation.recordRating"))

    /** A health probe's outcome (health only; probes do not move reputation). */
    const recordProbe = (agentId: string, healthy: boolean) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        yield* sql`UPDATE agents SET health_score = ${HEALTH_ALPHA}::float8 * ${healthy ? 1 : 0}::float8 + ${1 - HEALTH_ALPHA}::float8 * health_score,
                   health_updated_at = ${new Date(now)} WHERE id = ${agentId}`
        yield* cache.invalidateLocal(agentId)
      })

    /**
     * A chained sub-call's outcome (spec: recorded, but only root executions move reputation): health and the outcome
     * counters only, under the agent's row lock, in the caller's transaction.
     */
    const recordHealth = (agentId: string, success: boolean) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const [updated] = yield* sql<{ healthScore: number }>`
          UPDATE agents SET
            health_score = ${HEALTH_ALPHA}::float8 * ${success ? 1 : 0}::float8 + ${1 - HEALTH_ALPHA}::float8 * health_score,
            health_updated_at = ${new Date(now)},
            completed_executions = completed_executions + ${success ? 1 : 0}::int,
            failed_executions = failed_executions + ${success ? 0 : 1}::int
          WHERE id = ${agentId}
          RETURNING health_score`
        if (updated === undefined) return
        yield* cache.patch(agentId, (agent) => ({ ...agent, healthScore: updated.healthScore, healthUpdatedAt: new Date(now) }))
      }).pipe(Effect.withSpan("Reputation.recordHealth"))

    return { recordOutcome, recordHealth, recordRating, recordProbe } as const
  }),
  dependencies: [AgentCache.Default]
}) {}

const probeInterval = Config.integer("HEALTH_PROBE_INTERVAL_MS").pipe(Config.withDefault(60_000))

/**
 * One pass of the health prober: agents that declare `endpoints.health` and were not probed for
 * HEALTH_PROBE_INTERVAL_MS; the lease on `health_checked_at` keeps several processes from probing one agent twice.
 */
export const probeDueAgents = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const reputation = yield* Reputation
  const proxy = yield* AgentProxy
  const intervalMs = yield* probeInterval
  return yield* Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql<{ id: string; url: string }>`
        UPDATE agents SET health_checked_at = ${new Date(now)}
        WHERE id IN (
          SELECT id FROM agents
          WHERE status = 'active' AND endpoints ? 'health'
            AND (health_checked_at IS NULL OR health_checked_at <= ${new Date(now - intervalMs)})
          ORDER BY health_checked_at NULLS FIRST LIMIT 50 FOR UPDATE SKIP LOCKED)
        RETURNING id, endpoints->>'health' AS url`
      yield* Effect.forEach(due, (agent) => Effect.flatMap(proxy.probe(agent.url), (ok) => reputation.recordProbe(agent.id, ok)), {
        concurrency: 8,
        discard: true
      })
      return due.length
    })
})

export const HealthProbesLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const intervalMs = yield* probeInterval
    yield* probeDueAgents.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("health probe pass failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(Math.max(1_000, Math.floor(intervalMs / 4))))),
      Effect.forkScoped
    )
  })
)
