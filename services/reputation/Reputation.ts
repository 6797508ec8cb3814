// Reputation moved by ratings (execution outcomes are folded by Outcomes.ts) and health moved by probes, with events per change.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { AgentProxy } from "../../layers/AgentProxy.js"
import { TrustTier } from "../../src/domain/Agent.js"
import { newId } from "../../src/domain/Ids.js"
import { earnedTier } from "../../src/domain/Trust.js"
import { AgentCache } from "../agents/AgentCache.js"
import { HEALTH_ALPHA } from "./folding.js"
import { Outcomes } from "./Outcomes.js"

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
    const outcomes = yield* Outcomes

    /**
     * A client's rating of a completed root execution: moves the score by `delta` (clamped at 0/100) under the agent's
     * row lock and writes the `rating` event; None when the execution was already rated (nothing changes). Call inside
     * the caller's transaction.
     */
    const recordRating = (agentId: string, executionId: string, delta: number, details: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        // Outcomes recorded before the rating count before it (in the score and in the event history).
        yield* outcomes.foldAgent(agentId)
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
        yield* cache.invalidate(agentId)
        return Option.some({ eventId, scoreDelta: updated.after - updated.before, score: updated.after })
      }).pipe(Effect.withSpan("Reputation.recordRating"))

    /**
     * A resolved dispute moves the agent's score by `delta` (clamped at 0/100) under the agent's row lock, with its
     * `dispute` event. Call inside the dispute step's transaction.
     */
    const recordDispute = (d: { readonly agentId: string; readonly disputeId: string; readonly executionId: string; readonly delta: number; readonly forAgent: boolean; readonly at: number }) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ before: number; after: number }>`
          WITH old AS (SELECT id, reputation_score FROM agents WHERE id = ${d.agentId} FOR NO KEY UPDATE)
          UPDATE agents a SET reputation_score = LEAST(100, GREATEST(0, a.reputation_score + ${d.delta}::int))
          FROM old WHERE a.id = old.id
          RETURNING old.reputation_score AS before, a.reputation_score AS after`
        const updated = rows[0]
        if (updated === undefined) return
        yield* sql`INSERT INTO reputation_events ${sql.insert({
          id: newId("evt"),
          agentId: d.agentId,
          eventType: "dispute",
          scoreDelta: updated.after - updated.before,
          scoreAfter: updated.after,
          details: d.forAgent ? `dispute ${d.disputeId} resolved for the agent` : `dispute ${d.disputeId} resolved for the client`,
          executionId: d.executionId,
          createdAt: new Date(d.at)
        })}`
        yield* cache.invalidate(d.agentId)
      })

    /** A health probe's outcome (health only; probes do not move reputation). */
    const recordProbe = (agentId: string, healthy: boolean) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        yield* sql`UPDATE agents SET health_score = ${HEALTH_ALPHA}::float8 * ${healthy ? 1 : 0}::float8 + ${1 - HEALTH_ALPHA}::float8 * health_score,
                   health_updated_at = ${new Date(now)} WHERE id = ${agentId}`
        yield* cache.invalidate(agentId)
      })

    return { recordRating, recordDispute, recordProbe } as const
  }),
  dependencies: [AgentCache.Default, Outcomes.Default]
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
