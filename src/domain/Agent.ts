// The Agent and Capability resources: request schemas with every limit of spec section 8, and the response shape.
import { Schema } from "effect"
import { HealthBand } from "./Health.js"
import { AgentId, Wallet } from "./Ids.js"
import { MAX_BASE_PRICE, MIN_BASE_PRICE, Usdc } from "./Money.js"
import { MAX_DURATION_SECONDS_LIMIT, MAX_TOKENS_LIMIT, pricingIssues } from "./Pricing.js"

const Json = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** An absolute http(s) URL without credentials (agent endpoints, callbacks). */
export const HttpUrl = Schema.String.pipe(
  Schema.maxLength(2048),
  Schema.filter(
    (s) => {
      try {
        const url = new URL(s)
        return (url.protocol === "http:" || url.protocol === "https:") && url.username === "" && url.password === ""
      } catch {
        return false
      }
    },
    { message: () => "must be an absolute http(s) URL without credentials" }
  )
).annotations({ identifier: "HttpUrl" })

export const Endpoints = Schema.Struct({
  execution: HttpUrl,
  health: Schema.optionalWith(HttpUrl, { exact: true })
}).annotations({ identifier: "AgentEndpoints" })
export type Endpoints = typeof Endpoints.Type

export const PricingModel = Schema.Literal("per-request", "per-token", "per-minute", "dynamic")
export const Currency = Schema.Literal("USDC", "USDT", "DAI")

export const Pricing = Schema.Struct({
  model: PricingModel,
  basePrice: Usdc.pipe(
    Schema.filter((micros) => micros >= MIN_BASE_PRICE && micros <= MAX_BASE_PRICE, {
      message: () => "basePrice must be between 0.0001 and 10000"
    })
  ),
  currency: Currency,
  /** per-token: the most tokens one call may use (required for per-token; src/domain/Pricing.ts). */
  maxTokens: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, MAX_TOKENS_LIMIT)), { exact: true }),
  /** per-minute: the longest one call may run, in seconds (required for per-minute). */
  maxDurationSeconds: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, MAX_DURATION_SECONDS_LIMIT)), { exact: true }),
  /** per-minute: charged per started second or minute (default minute). */
  per: Schema.optionalWith(Schema.Literal("second", "minute"), { exact: true }),
  /** dynamic: the most the agent's quote may ask for one call (required for dynamic). */
  maxPrice: Schema.optionalWith(
    Usdc.pipe(Schema.filter((micros) => micros >= MIN_BASE_PRICE && micros <= MAX_BASE_PRICE, { message: () => "maxPrice must be between 0.0001 and 10000" })),
    { exact: true }
  )
}).annotations({ identifier: "Pricing" })

export const Example = Schema.Struct({
  name: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { exact: true }),
  input: Json,
  output: Schema.optionalWith(Json, { exact: true }),
  description: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(1000)), { exact: true })
}).annotations({ identifier: "CapabilityExample" })

export const CapabilityIdString = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, {
    message: () => "capability id: 1-100 characters of letters, digits, '.', '_', ':' or '-'"
  })
)

export const Capability = Schema.Struct({
  id: CapabilityIdString,
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  description: Schema.String.pipe(Schema.maxLength(2000)),
  inputSchema: Schema.optionalWith(Json, { exact: true }),
  outputSchema: Schema.optionalWith(Json, { exact: true }),
  examples: Schema.optionalWith(Schema.Array(Example).pipe(Schema.maxItems(20)), { exact: true }),
  pricing: Pricing
}).annotations({ identifier: "Capability" })
export type Capability = typeof Capability.Type

const uniqueIds = (caps: ReadonlyArray<{ readonly id: string }>) => new Set(caps.map((c) => c.id)).size === caps.length

/** A registration's or update's capabilities: metered ones must declare their maximum (stored ones may predate it). */
export const Capabilities = Schema.Array(Capability).pipe(
  Schema.minItems(1),
  Schema.maxItems(50),
  Schema.filter((caps) => uniqueIds(caps) || "capability ids must be unique within the agent"),
  Schema.filter((caps) => {
    const issues = caps.flatMap((c, i) => pricingIssues(c.pricing).map((issue) => ({ path: [i, "pricing", issue.path], message: issue.message })))
    return issues.length === 0 ? true : issues
  })
)

export const Tag = Schema.Trim.pipe(Schema.compose(Schema.Lowercase), Schema.compose(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(50))))
export const Tags = Schema.Array(Tag).pipe(Schema.maxItems(10))

/** Length in characters (code points), not UTF-16 units. */
const characters = (min: number, max: number) => (s: string) => {
  const n = [...s].length
  return (n >= min && n <= max) || `must be ${min}-${max} characters long`
}

export const Name = Schema.String.pipe(Schema.maxLength(400), Schema.filter(characters(3, 100)))
export const Description = Schema.String.pipe(Schema.maxLength(1000))
export const Metadata = Json.pipe(
  Schema.filter((m) => {
    try {
      return JSON.stringify(m).length <= 16_384 || "metadata must serialise to at most 16384 characters"
    } catch {
      return "metadata must be plain JSON"
    }
  })
)

export const ChainSettings = Schema.Struct({
  chain_enabled: Schema.optionalWith(Schema.Boolean, { exact: true }),
  chain_max_depth: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 5)), { exact: true }),
  chain_allowed_callers: Schema.optionalWith(Schema.Array(AgentId).pipe(Schema.maxItems(100)), { exact: true }),
  chain_blocked_callers: Schema.optionalWith(Schema.Array(AgentId).pipe(Schema.maxItems(100)), { exact: true })
}).annotations({ identifier: "ChainSettings" })

/**
 * The agent wallet's EIP-712 signature over the registration, needed when another wallet pays the fee
 * (services/agents/registrationProof.ts, docs/clients.md).
 */
export const WalletProof = Schema.Struct({
  signature: Schema.String.pipe(Schema.maxLength(200)).annotations({ description: "0x-hex 65-byte EIP-712 signature by the agent wallet" }),
  issuedAt: Schema.Int.annotations({ description: "When it was signed, Unix time in milliseconds (good for 5 minutes)" })
}).annotations({ identifier: "WalletProof" })

export const RegisterAgentRequest = Schema.Struct({
  wallet: Wallet,
  name: Name,
  description: Schema.optionalWith(Description, { exact: true }),
  tags: Schema.optionalWith(Tags, { exact: true }),
  capabilities: Capabilities,
  endpoints: Endpoints,
  metadata: Schema.optionalWith(Metadata, { exact: true }),
  walletProof: Schema.optionalWith(WalletProof, { exact: true })
}).annotations({ identifier: "RegisterAgentRequest", parseOptions: { errors: "all" } })
export type RegisterAgentRequest = typeof RegisterAgentRequest.Type

export const UpdateAgentRequest = Schema.Struct({
  name: Schema.optionalWith(Name, { exact: true }),
  description: Schema.optionalWith(Description, { exact: true }),
  tags: Schema.optionalWith(Tags, { exact: true }),
  capabilities: Schema.optionalWith(Capabilities, { exact: true }),
  endpoints: Schema.optionalWith(Endpoints, { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true }),
  chainSettings: Schema.optionalWith(ChainSettings, { exact: true }),
  /** Owner pause/resume; 'suspended' is the platform's to set. */
  status: Schema.optionalWith(Schema.Literal("active", "inactive"), { exact: true })
}).annotations({ identifier: "UpdateAgentRequest", parseOptions: { errors: "all" } })
export type UpdateAgentRequest = typeof UpdateAgentRequest.Type

/** Chain settings as stored and shown (every field present, defaults applied). */
export const StoredChainSettings = Schema.Struct({
  chain_enabled: Schema.Boolean,
  chain_max_depth: Schema.Number,
  chain_allowed_callers: Schema.Array(Schema.String),
  chain_blocked_callers: Schema.Array(Schema.String)
})

export const AgentStatus = Schema.Literal("active", "inactive", "suspended")
export const StatusSetBy = Schema.Literal("owner", "operator")
export const CircuitState = Schema.Literal("closed", "open", "half-open")
export const TrustTier = Schema.Literal("new", "trusted", "premium")
export type TrustTier = typeof TrustTier.Type

/** What the stored agent and its public resource share. */
const agentFields = {
  id: AgentId,
  wallet: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  tags: Schema.Array(Schema.String),
  capabilities: Schema.Array(Capability),
  endpoints: Endpoints,
  metadata: Schema.NullOr(Json),
} as const

/** The last paid call of a per-token capability answered without `X-Usage-Units` (noted at most once an hour). */
export const UsageWarning = Schema.Struct({
  code: Schema.Literal("USAGE_NOT_REPORTED"),
  capabilityId: Schema.String,
  requestId: Schema.String,
  at: Schema.String,
  message: Schema.String
}).annotations({ identifier: "UsageWarning" })

export const AgentResource = Schema.Struct({
  ...agentFields,
  status: AgentStatus,
  /** Whose decision the status is (an operator's pause or suspension is lifted only by an operator). */
  status_set_by: StatusSetBy,
  /** Why an operator paused or suspended the agent (null otherwise). */
  status_reason: Schema.NullOr(Schema.String),
  reputation_score: Schema.Number,
  health_score: Schema.Number,
  health_band: HealthBand,
  health_updated_at: Schema.String,
  circuitState: CircuitState,
  trustTier: TrustTier,
  settlementType: Schema.Literal("instant", "delayed"),
  settlementDelay: Schema.NullOr(Schema.String),
  chain_enabled: Schema.Boolean,
  chainSettings: StoredChainSettings,
  /** What the owner should fix: a per-token capability answered a paid call without reporting usage (it earned 0 tokens). */
  warnings: Schema.optional(Schema.Array(UsageWarning)),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "Agent" })
export type AgentResource = typeof AgentResource.Type

/** An agent as stored (jsonb columns decoded; capability prices as micro-USDC). */
export const AgentRecord = Schema.Struct({
  ...agentFields,
  chainSettings: StoredChainSettings,
  status: Schema.Literal("pending", "active", "inactive", "suspended"),
  statusReason: Schema.NullOr(Schema.String),
  /** Whose decision the status is: an operator's pause or suspension is lifted only by an operator. */
  statusSetBy: Schema.optionalWith(StatusSetBy, { default: () => "owner" as const }),
  reputationScore: Schema.Number,
  healthScore: Schema.Number,
  healthUpdatedAt: Schema.DateFromSelf,
  circuitState: CircuitState,
  circuitSnapshot: Schema.optionalWith(Schema.NullOr(Schema.Unknown), { default: () => null }),
  trustTier: TrustTier,
  trustTierOverride: Schema.NullOr(TrustTier),
  completedExecutions: Schema.BigInt,
  registrationTxHash: Schema.NullOr(Schema.String),
  usageWarning: Schema.optionalWith(Schema.NullOr(Schema.Struct({ capabilityId: Schema.String, requestId: Schema.String, at: Schema.String })), { default: () => null }),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type AgentRecord = typeof AgentRecord.Type
