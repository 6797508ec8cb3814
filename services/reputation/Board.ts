// Reputation reads and ratings: an agent's profile with its recent events, its event history, the leaderboard, and a
// paying client's one rating of a completed root execution (authorised by that execution's payment header, either x402 version).
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { holdsPayment } from "../../layers/x402/credential.js"
import { Conflict, Forbidden, NotFound } from "../../src/domain/Errors.js"
import {
  LEADERBOARD_DEFAULT_LIMIT,
  RECENT_EVENTS,
  REPUTATION_EVENTS_DEFAULT_LIMIT,
  REPUTATION_META,
  ratingDelta,
  type RatingRequest,
  type ReputationEvent,
  tierOf
} from "../../src/domain/Reputation.js"
import { Reputation } from "./Reputation.js"

const EventRow = Schema.Struct({
  id: Schema.String,
  eventType: Schema.Literal("transaction_success", "transaction_fail", "dispute", "rating"),
  scoreDelta: Schema.Number,
  details: Schema.String,
  createdAt: Schema.DateFromSelf
})
const AgentRow = Schema.Struct({ id: Schema.String, name: Schema.String, reputationScore: Schema.Number, status: Schema.String })
const RatedRow = Schema.Struct({
  id: Schema.String,
  agentId: Schema.String,
  status: Schema.String,
  depth: Schema.Number,
  headerSha256: Schema.String
})

const toEvent = (row: typeof EventRow.Type): ReputationEvent => ({
  id: row.id,
  event_type: row.eventType,
  score_delta: row.scoreDelta,
  details: row.details,
  created_at: row.createdAt.toISOString()
})

const notFound = (agentId: string) => new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })

export class ReputationBoard extends Effect.Service<ReputationBoard>()("reputation/ReputationBoard", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const reputation = yield* Reputation

    /** Registered agents only (an agent whose registration fee is still settling does not exist yet). */
    const agent = (agentId: string) =>
      sql`SELECT id, name, reputation_score, status FROM agents WHERE id = ${agentId} AND status <> 'pending'`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(AgentRow))),
        Effect.flatMap((rows) => Option.match(Option.fromNullable(rows[0]), { onNone: () => Effect.fail(notFound(agentId)), onSome: Effect.succeed }))
      )

    const events = (agentId: string, limit: number, offset: number) =>
      sql`SELECT id, event_type, score_delta, details, created_at FROM reputation_events
          WHERE agent_id = ${agentId} ORDER BY created_at DESC, seq DESC LIMIT ${limit} OFFSET ${offset}`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(EventRow))),
        Effect.map((rows) => rows.map(toEvent))
      )

    const profile = (agentId: string) =>
      Effect.gen(function* () {
        const found = yield* agent(agentId)
        return {
          agentId: found.id,
          name: found.name,
          score: found.reputationScore,
          tier: tierOf(found.reputationScore),
          status: found.status,
          recentEvents: yield* events(agentId, RECENT_EVENTS, 0),
          meta: REPUTATION_META
        }
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("ReputationBoard.profile"))

    const history = (agentId: string, limit = REPUTATION_EVENTS_DEFAULT_LIMIT, offset = 0) =>
      Effect.gen(function* () {
        yield* agent(agentId)
        const [counted] = yield* sql<{ total: number }>`SELECT count(*)::int AS total FROM reputation_events WHERE agent_id = ${agentId}`
        const total = counted?.total ?? 0
        return {
          events: yield* events(agentId, limit, offset),
          pagination: { total, limit, offset, hasMore: offset + limit < total }
        }
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("ReputationBoard.history"))

    /** Active agents by score (health, then id, break ties), from the discovery listing's index. */
    const leaderboard = (limit = LEADERBOARD_DEFAULT_LIMIT) =>
      sql`SELECT l.agent_id AS id, a.name, l.reputation_score, a.status FROM agent_listing l JOIN agents a ON a.id = l.agent_id
          WHERE l.status = 'active' ORDER BY l.reputation_score DESC, l.health_score DESC, l.agent_id LIMIT ${limit}`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(AgentRow))),
        Effect.map((rows) => ({
          leaderboard: rows.map((row, i) => ({
            rank: i + 1,
            agentId: row.id,
            name: row.name,
            score: row.reputationScore,
            tier: tierOf(row.reputationScore)
          }))
        })),
        Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }),
        Effect.withSpan("ReputationBoard.leaderboard")
      )

    /**
     * The client who paid for a completed root execution rates it once: 1-5 stars move the agent's score by
     * ratingDelta. The payment header of that execution (X-PAYMENT or PAYMENT-SIGNATURE, its X-PAYMENT-USED value) proves having paid.
     */
    const rate = (request: RatingRequest, proofs: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const rows = yield* sql`
          SELECT e.id, e.agent_id, e.status, e.depth, p.header_sha256
          FROM executions e JOIN payments p ON p.id = e.payment_id WHERE e.id = ${request.requestId}`.pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(RatedRow)))
        )
        const execution = rows[0]
        if (execution === undefined) {
          return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${request.requestId}` })
        }
        if (!holdsPayment(proofs, execution.headerSha256)) {
          return yield* new Forbidden({ code: "RATING_NOT_AUTHORIZED", message: "send the payment header of the execution you rate (its X-PAYMENT-USED value)" })
        }
        const refuse = (reason: "not_completed" | "chained" | "already_rated", message: string) =>
          new Conflict({ code: "RATING_NOT_ALLOWED", message, details: { reason } })
        if (execution.depth !== 0) return yield* refuse("chained", "executions inside a chain are not rated; rate the root execution")
        if (execution.status !== "completed") {
          return yield* refuse("not_completed", `only a completed execution can be rated (this one is ${execution.status})`)
        }
        const recorded = yield* sql.withTransaction(
          reputation.recordRating(execution.agentId, execution.id, ratingDelta(request.rating), `rated ${request.rating} of 5 stars`)
        )
        if (Option.isNone(recorded)) return yield* refuse("already_rated", "this execution was already rated")
        return {
          eventId: recorded.value.eventId,
          agentId: execution.agentId,
          requestId: execution.id,
          rating: request.rating,
          score_delta: recorded.value.scoreDelta,
          score: recorded.value.score,
          tier: tierOf(recorded.value.score)
        }
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("ReputationBoard.rate"))

    return { profile, history, leaderboard, rate } as const
  }),
  dependencies: [Reputation.Default]
}) {}
