// Discovery on the wire: strictly validated query parameters (a bad value is a 400, never coerced) and the agent views
// of /discover, /discover/search and /discover/recommend, as spec section 4 lists them.
import { Schema } from "effect"
import { Tag } from "./Agent.js"
import { HealthBand } from "./Health.js"
import { Usdc } from "./Money.js"

export const DISCOVER_DEFAULT_LIMIT = 10
export const DISCOVER_MAX_LIMIT = 50
/** Deepest offset served: totals are counted up to 1,000 (see services/discovery/Repo.ts). */
export const DISCOVER_MAX_OFFSET = 1_000
/** Agents below this health are left out unless minHealth says otherwise (spec section 4, rule 2). */
export const DEFAULT_MIN_HEALTH = 0.3
/** Longest text accepted in q, query and need; only its first 1,000 characters are searched. */
export const MAX_TEXT_CHARS = 10_000

/** A non-negative decimal as text ("0.5", "40"): no signs, exponents, spaces, hex or empty strings. */
const decimal = (min: number, max: number) =>
  Schema.String.pipe(
    Schema.pattern(/^(0|[1-9]\d{0,5})(\.\d{1,6})?$/, { message: () => `must be a decimal number between ${min} and ${max}` }),
    Schema.compose(Schema.NumberFromString),
    Schema.filter((n) => (n >= min && n <= max) || `must be between ${min} and ${max}`)
  )

export const integer = (min: number, max: number) =>
  Schema.String.pipe(
    Schema.pattern(/^(0|[1-9]\d{0,6})$/, { message: () => `must be a whole number between ${min} and ${max}` }),
    Schema.compose(Schema.NumberFromString),
    Schema.filter((n) => (n >= min && n <= max) || `must be between ${min} and ${max}`)
  )

export const Limit = (max: number) => integer(1, max)
export const Offset = (max: number) => integer(0, max)
export const Score0to100 = decimal(0, 100)
export const Score0to1 = decimal(0, 1)

export const BooleanParam = Schema.Literal("true", "false").annotations({ message: () => "must be true or false" })

/** Free text: any characters, 1 to 10,000 of them, not only spaces. */
export const SearchText = Schema.String.pipe(
  Schema.maxLength(MAX_TEXT_CHARS),
  Schema.filter((s) => s.trim().length > 0 || "must not be empty")
)

/** Comma-separated tags, each trimmed and lower-cased (1-50 characters), at most 10, none empty. */
export const TagList = Schema.transform(Schema.String, Schema.Array(Tag).pipe(Schema.minItems(1), Schema.maxItems(10)), {
  strict: true,
  decode: (s) => s.split(","),
  encode: (tags) => tags.join(",")
})

export const SortParam = Schema.Literal("relevance", "reputation", "price", "newest")

export const DiscoverParams = Schema.Struct({
  q: Schema.optional(SearchText),
  tags: Schema.optional(TagList),
  capability: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  maxPrice: Schema.optional(Usdc),
  minReputation: Schema.optional(Score0to100),
  minHealth: Schema.optional(Score0to1),
  chainable: Schema.optional(BooleanParam),
  sort: Schema.optional(SortParam),
  limit: Schema.optional(Limit(DISCOVER_MAX_LIMIT)),
  offset: Schema.optional(Offset(DISCOVER_MAX_OFFSET))
}).annotations({ parseOptions: { errors: "all" } })
export type DiscoverParams = typeof DiscoverParams.Type

export const SearchParams = Schema.Struct({
  query: SearchText,
  category: Schema.optional(Tag),
  minScore: Schema.optional(Score0to1),
  minHealth: Schema.optional(Score0to1),
  limit: Schema.optional(Limit(DISCOVER_MAX_LIMIT))
}).annotations({ parseOptions: { errors: "all" } })
export type SearchParams = typeof SearchParams.Type

export const RecommendParams = Schema.Struct({
  need: SearchText,
  minHealth: Schema.optional(Score0to1)
}).annotations({ parseOptions: { errors: "all" } })
export type RecommendParams = typeof RecommendParams.Type

export const CapabilitySummary = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  pricing: Schema.Struct({ model: Schema.String, basePrice: Schema.String, currency: Schema.String })
}).annotations({ identifier: "CapabilitySummary" })

export const DiscoveredAgent = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  capabilities: Schema.Array(CapabilitySummary),
  tags: Schema.Array(Schema.String),
  health_score: Schema.Number,
  health_band: HealthBand,
  reputation_score: Schema.Number,
  trustTier: Schema.Literal("new", "trusted", "premium"),
  settlementType: Schema.Literal("instant", "delayed"),
  settlementDelay: Schema.NullOr(Schema.String)
}).annotations({ identifier: "DiscoveredAgent" })
export type DiscoveredAgent = typeof DiscoveredAgent.Type

export const Pagination = Schema.Struct({
  total: Schema.Number.annotations({ description: "Matches, counted up to 1,000 (see totalCapped)" }),
  limit: Schema.Number,
  offset: Schema.Number,
  totalCapped: Schema.Boolean.annotations({ description: "true when more than 1,000 agents match: total is then 1,000" }),
  hasMore: Schema.Boolean
}).annotations({ identifier: "DiscoveryPagination" })

export const DiscoverResult = Schema.Struct({ agents: Schema.Array(DiscoveredAgent), pagination: Pagination })

export const SearchedAgent = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  composite_score: Schema.Number,
  capabilities: Schema.Array(CapabilitySummary),
  health_score: Schema.Number,
  health_band: HealthBand,
  reputation_score: Schema.Number
}).annotations({ identifier: "SearchedAgent" })
export type SearchedAgent = typeof SearchedAgent.Type

export const RecommendedAgent = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  capabilities: Schema.Array(CapabilitySummary),
  reputation_score: Schema.Number,
  matchScore: Schema.Number,
  trustTier: Schema.Literal("new", "trusted", "premium"),
  settlementType: Schema.Literal("instant", "delayed")
}).annotations({ identifier: "RecommendedAgent" })
export type RecommendedAgent = typeof RecommendedAgent.Type

export const Recommendation = Schema.Struct({
  recommended: Schema.NullOr(RecommendedAgent),
  alternatives: Schema.Array(RecommendedAgent)
})

export const TagCount = Schema.Struct({ tag: Schema.String, count: Schema.Number })
