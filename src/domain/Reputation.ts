// Reputation on the wire (spec sections 2 and 4): tiers by score band, the rating scale and its score deltas, events,
// the profile, the leaderboard and the rating request.
import { Schema } from "effect"
import { Limit, Offset } from "./Discovery.js"

export const REPUTATION_META = { minScore: 0, maxScore: 100, defaultScore: 50 } as const

export const ReputationTier = Schema.Literal("verified", "excellent", "good", "new", "at-risk")
export type ReputationTier = typeof ReputationTier.Type

/** Spec bands: 90-100 verified, 70-89 excellent, 50-69 good, 40-49 new, 0-39 at-risk. */
export const tierOf = (score: number): ReputationTier =>
  score >= 90 ? "verified" : score >= 70 ? "excellent" : score >= 50 ? "good" : score >= 40 ? "new" : "at-risk"

/** A rating of 1-5 stars moves the score by -2, -1, 0, +1 or +2 (a 5-star rating weighs as much as two successes). */
export const ratingDelta = (stars: 1 | 2 | 3 | 4 | 5): number => stars - 3

export const REPUTATION_EVENTS_DEFAULT_LIMIT = 50
export const REPUTATION_EVENTS_MAX_LIMIT = 100
export const LEADERBOARD_DEFAULT_LIMIT = 10
export const LEADERBOARD_MAX_LIMIT = 50
/** Events shown on the profile. */
export const RECENT_EVENTS = 10

export const ReputationEvent = Schema.Struct({
  id: Schema.String,
  event_type: Schema.Literal("transaction_success", "transaction_fail", "dispute", "rating"),
  score_delta: Schema.Number,
  details: Schema.String,
  created_at: Schema.String
}).annotations({ identifier: "ReputationEvent" })
export type ReputationEvent = typeof ReputationEvent.Type

export const ReputationProfile = Schema.Struct({
  agentId: Schema.String,
  name: Schema.String,
  score: Schema.Number,
  tier: ReputationTier,
  status: Schema.String,
  recentEvents: Schema.Array(ReputationEvent),
  meta: Schema.Struct({ minScore: Schema.Number, maxScore: Schema.Number, defaultScore: Schema.Number })
}).annotations({ identifier: "ReputationProfile" })

export const EventsQuery = Schema.Struct({
  limit: Schema.optional(Limit(REPUTATION_EVENTS_MAX_LIMIT)),
  offset: Schema.optional(Offset(1_000_000))
}).annotations({ parseOptions: { errors: "all" } })

export const EventsPage = Schema.Struct({
  events: Schema.Array(ReputationEvent),
  pagination: Schema.Struct({ total: Schema.Number, limit: Schema.Number, offset: Schema.Number, hasMore: Schema.Boolean })
})

export const LeaderboardQuery = Schema.Struct({ limit: Schema.optional(Limit(LEADERBOARD_MAX_LIMIT)) }).annotations({
  parseOptions: { errors: "all" }
})

export const ReputationLeaderboard = Schema.Struct({
  leaderboard: Schema.Array(Schema.Struct({
    rank: Schema.Number,
    agentId: Schema.String,
    name: Schema.String,
    score: Schema.Number,
    tier: ReputationTier
  }))
})

export const Stars = Schema.Literal(1, 2, 3, 4, 5).annotations({ message: () => "must be a whole number of stars from 1 to 5" })

export const RatingRequest = Schema.Struct({
  requestId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  rating: Stars
}).annotations({ parseOptions: { errors: "all" } })
export type RatingRequest = typeof RatingRequest.Type

export const RatingRecorded = Schema.Struct({
  eventId: Schema.String,
  agentId: Schema.String,
  requestId: Schema.String,
  rating: Stars,
  score_delta: Schema.Number,
  score: Schema.Number,
  tier: ReputationTier
})

export const RatingHeaders = Schema.Struct({ "x-payment": Schema.optional(Schema.String) })
