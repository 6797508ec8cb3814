// Every error code the API can answer with: its HTTP status, its meaning, and the envelope it travels in.
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { PaymentRequirements } from "../../layers/x402/requirements.js"
import { isX402V1Network } from "../../layers/x402/networks.js"
import { PaymentRequirementsV2 } from "../../layers/x402/v2.js"

/**
 * The single registry of error codes. `docs/errors.md` is written from this table
 * (see test/errors.test.ts, which fails when the two drift apart).
 */
export const ErrorCodes = {
  VALIDATION_ERROR: { status: 400, meaning: "The body, path or query failed validation; details.issues lists each failing field path." },
  INVALID_JSON: { status: 400, meaning: "The request body is not valid JSON." },
  DEPTH_LIMIT: { status: 400, meaning: "The chained call would go deeper than the chain allows (the root agent's chain_max_depth, never beyond 5); details.currentDepth, details.maxDepth." },
  CIRCULAR_DEPENDENCY: { status: 400, meaning: "The target agent is already in the chain's call path; details.chain lists the agent ids ending in the repeated one." },
  AUTH_REQUIRED: { status: 401, meaning: "X-Agent-Wallet and X-Agent-Signature headers are required." },
  AUTH_MALFORMED: { status: 401, meaning: "The signature header is not `service-auth:{agentId}:{timestampMs}:sig:{0x signature}` or the wallet header is not an address." },
  AUTH_EXPIRED: { status: 401, meaning: "The signed timestamp is more than 5 minutes old (a withdrawal authorization: its deadline has passed)." },
  AUTH_FUTURE_TIMESTAMP: { status: 401, meaning: "The signed timestamp lies more than 30 seconds in the future." },
  AUTH_INVALID_SIGNATURE: { status: 401, meaning: "The signature does not recover to the wallet in X-Agent-Wallet (a withdrawal authorization: to the agent's registered wallet, for exactly the agent, amount, destination, nonce and deadline sent)." },
  AUTH_SIGNATURE_REUSED: { status: 401, meaning: "The signature was already used for a change: every state-changing request needs its own signed timestamp (reads reuse one for its 5 minutes; a withdrawal authorization: its own nonce; a payer's limits: a timestamp later than the last change's)." },
  WALLET_PROOF_INVALID: { status: 401, meaning: "A registration's walletProof is malformed or is not the agent wallet's EIP-712 signature over this registration body (docs/clients.md); nothing was charged." },
  WALLET_PROOF_EXPIRED: { status: 401, meaning: "A registration's walletProof.issuedAt is more than 5 minutes old or more than 30 seconds ahead; sign again. Nothing was charged." },
  PAYER_AUTH_REQUIRED: { status: 401, meaning: "Payer spending limits need X-Payer-Signature and X-Payer-Signed-At: the payer wallet's EIP-712 signature (docs/clients.md, Spending limits)." },
  PAYER_SIGNATURE_INVALID: { status: 401, meaning: "X-Payer-Signature is malformed or does not recover to the wallet in the path for exactly this action, these limits and this X-Payer-Signed-At (docs/clients.md, Spending limits)." },
  OPERATOR_AUTH_REQUIRED: { status: 401, meaning: "Operator endpoints need `Authorization: Bearer <OPERATOR_TOKEN>`." },
  METRICS_AUTH_REQUIRED: { status: 401, meaning: "GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>` (METRICS_TOKEN is set, or the service runs against a real chain)." },
  CLIENT_ID_REQUIRED: { status: 401, meaning: "X-Client-Id is missing or was not issued by this marketplace; every paid execution's response carries the payer's X-Client-Id." },
  CHAIN_TOKEN_INVALID: { status: 401, meaning: "X-Chain-Token is malformed, tampered with or not signed by this marketplace." },
  CHAIN_TOKEN_EXPIRED: { status: 401, meaning: "X-Chain-Token is older than 30 seconds; use the childToken of the latest chained response." },
  PAYMENT_REQUIRED: { status: 402, meaning: "Payment missing or refused; details.reason says why and details.price/wallet/network what to pay. details.reason `spending_limit_exceeded`: the payer's own spending limits refuse the call (details.limit names perCallMax, perDayMax, perAgentPerDayMax or allowedAgents); nothing was reserved or charged." },
  BUDGET_EXCEEDED: { status: 402, meaning: "The call costs more than the chain's remaining budget (or a root call more than its X-Chain-Budget); details.estimated, details.remaining, details.shortfall. Nothing was reserved." },
  AUTH_WRONG_AGENT: { status: 403, meaning: "The signed message names a different agent than the one addressed." },
  AUTH_WALLET_MISMATCH: { status: 403, meaning: "The authenticated wallet is not the agent's registered wallet." },
  WALLET_NOT_CONTROLLED: { status: 403, meaning: "The registration fee was paid by another wallet than the agent's and the registration carries no walletProof signed by the agent's wallet (details.wallet, details.payer); nothing was charged." },
  RETRY_NOT_AUTHORIZED: { status: 403, meaning: "A retry must present the X-PAYMENT value of the original execution." },
  RECEIPT_NOT_AUTHORIZED: { status: 403, meaning: "A receipt is read with the payment header of its execution (its X-PAYMENT-USED value, as X-PAYMENT or PAYMENT-SIGNATURE)." },
  NOT_TRANSACTION_PAYER: { status: 403, meaning: "The X-Client-Id belongs to a wallet other than the one that paid for the transaction." },
  DISPUTE_RATE_EXCEEDED: { status: 403, meaning: "The client disputes more than 20% of its paid transactions (see docs/decisions.md); no new dispute is accepted." },
  RATING_NOT_AUTHORIZED: { status: 403, meaning: "A rating must present the X-PAYMENT value of the execution it rates." },
  AGENT_SUSPENDED: { status: 403, meaning: "The agent was suspended by the platform and cannot be changed by its owner." },
  AGENT_PAUSED_BY_OPERATOR: { status: 403, meaning: "An operator paused the agent: only an operator makes it active again (details.reason says why; the agent's resource shows it too)." },
  WITHDRAWAL_AUTHORIZATION_REQUIRED: { status: 403, meaning: "A payout to an address other than the agent's registered wallet needs `authorization`, an EIP-712 signature over the amount and destination (docs/withdrawals.md); details.typedData says what to sign. Nothing was taken." },
  CHAIN_DISABLED: { status: 403, meaning: "The target agent does not accept chained calls, or not from this caller (its chain_blocked_callers or chain_allowed_callers)." },
  AGENT_NOT_CHAINABLE: { status: 403, meaning: "The target agent cannot be called in a chain (reputation below 40)." },
  NOT_FOUND: { status: 404, meaning: "No route or resource at this path." },
  AGENT_NOT_FOUND: { status: 404, meaning: "The agent does not exist or is not active." },
  CAPABILITY_NOT_FOUND: { status: 404, meaning: "The capability id is not on the agent." },
  EXECUTION_NOT_FOUND: { status: 404, meaning: "No execution with this request id." },
  TRANSACTION_NOT_FOUND: { status: 404, meaning: "No transaction with this id." },
  WITHDRAWAL_NOT_FOUND: { status: 404, meaning: "No withdrawal with this id." },
  DISPUTE_NOT_FOUND: { status: 404, meaning: "No dispute with this id." },
  WEBHOOK_NOT_FOUND: { status: 404, meaning: "No webhook with this id (or it belongs to another agent)." },
  CHAIN_NOT_FOUND: { status: 404, meaning: "No chain with this id, or the chain has ended (its unspent budget was given back)." },
  SPENDING_LIMITS_NOT_FOUND: { status: 404, meaning: "The payer wallet has no spending limits (none registered, or removed)." },
  ACTOR_NOT_FOUND: { status: 404, meaning: "Operators: no actor of this machine kind with this id." },
  REFUND_NOT_FOUND: { status: 404, meaning: "Operators: no refund with this id." },
  CHANNEL_NOT_FOUND: { status: 404, meaning: "Operators: no batch-settlement channel with this id (a channel is known once its deposit was seen)." },
  RECEIPT_NOT_FOUND: { status: 404, meaning: "No receipt for this execution (yet): receipts exist for calls that completed with their own x402 payment settled on chain; not for failed or pending calls, nor for calls paid from a chain's budget." },
  WALLET_ALREADY_REGISTERED: { status: 409, meaning: "This wallet already has an agent (one agent per wallet); nothing was charged." },
  IDEMPOTENCY_CONFLICT: { status: 409, meaning: "The idempotencyKey was used with a different agent, capability or input." },
  INSUFFICIENT_CREDIT: { status: 409, meaning: "The credit withdrawal exceeds the payer's credit (details.credit), or the credit is empty; nothing was taken." },
  INSUFFICIENT_BALANCE: { status: 409, meaning: "The withdrawal exceeds the agent's available balance (details.available); nothing was taken." },
  EXECUTION_NOT_RETRYABLE: { status: 409, meaning: "Only a failed or timed-out execution can be retried, and only within its retry window (details.retryUntil)." },
  DISPUTE_EXISTS: { status: 409, meaning: "The transaction already has a dispute (details.disputeId); one dispute per transaction." },
  DISPUTE_WINDOW_CLOSED: { status: 409, meaning: "Disputes must be filed within 24 hours of the transaction." },
  TRANSACTION_NOT_DISPUTABLE: { status: 409, meaning: "Only a completed execution whose payment settled can be disputed (failed ones are refunded on their own)." },
  DISPUTE_CLOSED: { status: 409, meaning: "The dispute is resolved: it takes no more responses, evidence or resolutions, and no money moves again." },
  DISPUTE_ALREADY_RESPONDED: { status: 409, meaning: "The agent already responded to this dispute; more material goes in as evidence." },
  EVIDENCE_LIMIT_REACHED: { status: 409, meaning: "Each party may submit at most 10 evidence items per dispute." },
  WEBHOOK_LIMIT_REACHED: { status: 409, meaning: "An agent may have at most 5 webhooks." },
  DELIVERY_ALREADY_REQUEUED: { status: 409, meaning: "This dead-letter entry was already requeued (details.requeuedAt)." },
  LEVER_NOT_APPLICABLE: { status: 409, meaning: "Operators: the actor's current state does not take this lever (details.state); nothing changed, and the refusal is recorded." },
  RATING_NOT_ALLOWED: { status: 409, meaning: "Only a completed root execution can be rated, once; details.reason is not_completed, chained or already_rated." },
  CHAIN_TIMEOUT: { status: 408, meaning: "The chain is older than its 5-minute limit; no more sub-calls are accepted." },
  LENGTH_REQUIRED: { status: 411, meaning: "Request bodies must be sent with a Content-Length (chunked uploads are not accepted)." },
  PAYLOAD_TOO_LARGE: { status: 413, meaning: "The request body exceeds the documented limit (details.limitBytes)." },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, meaning: "Request bodies must be `application/json`." },
  RATE_LIMITED: { status: 429, meaning: "Too many requests in the current window; see Retry-After." },
  DISPUTE_LIMIT_REACHED: { status: 429, meaning: "A client may file at most 10 disputes per calendar month (UTC)." },
  OPERATOR_AUTH_THROTTLED: { status: 429, meaning: "Too many failed operator-token attempts from this client address (the operator API and the /ops login count together: OPS_LOGIN_MAX_FAILURES in OPS_LOGIN_WINDOW_SECONDS); every further wrong token is refused until Retry-After (details.retryAfterSeconds); the right token is always accepted." },
  QUOTE_RATE_LIMITED: { status: 429, meaning: "This client (a verified payer, or else its address) asked for too many dynamic quotes: details.limit is `in_flight` (QUOTE_CLIENT_IN_FLIGHT to this agent) or `rate` (QUOTE_CLIENT_PER_WINDOW in QUOTE_WINDOW_SECONDS); nothing was charged and the agent was not asked. See Retry-After." },
  INTERNAL_ERROR: { status: 500, meaning: "An unexpected fault on our side; nothing was charged that was not delivered. The request id in details lets operators find it." },
  EXECUTION_FAILED: { status: 502, meaning: "The agent failed (error, non-2xx, invalid JSON, or output not matching outputSchema); details.agentError says how. The payment is held for a retry." },
  QUOTE_FAILED: { status: 502, meaning: "A dynamic capability's quote call failed, was malformed or asked more than the capability's maxPrice; nothing was charged." },
  SETTLEMENT_FAILED: { status: 502, meaning: "The on-chain settlement of the payment failed; nothing was charged." },
  AGENT_UNAVAILABLE: { status: 503, meaning: "The agent's circuit breaker is open; nothing was charged. Retry-After says when it will be tried again." },
  QUOTE_BUSY: { status: 503, meaning: "Every quote slot of this agent is held by other verified payers (each limited to QUOTE_CLIENT_IN_FLIGHT); nothing was charged and the agent was not asked. See Retry-After." },
  SERVICE_UNAVAILABLE: { status: 503, meaning: "A dependency (database or chain) is not reachable right now; nothing was charged." },
  EXECUTION_TIMEOUT: { status: 504, meaning: "The agent did not answer within the execution timeout; the payment is held for a retry." }
} as const satisfies Record<string, { readonly status: number; readonly meaning: string }>

export type ErrorCode = keyof typeof ErrorCodes

/** Free-form error details (field paths, reasons, amounts as decimal strings). */
export const Details = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type Details = typeof Details.Type

type Fields<C extends ErrorCode> = {
  readonly code: Schema.Literal<[C, ...Array<C>]>
  readonly message: typeof Schema.String
  readonly details: Schema.optionalWith<typeof Details, { exact: true }>
}
const fields = <C extends ErrorCode>(...codes: [C, ...Array<C>]): Fields<C> => ({
  code: Schema.Literal(...codes),
  message: Schema.String,
  details: Schema.optionalWith(Details, { exact: true })
})

/**
 * Puts a tagged error class on the wire as the spec's envelope
 * `{success:false, error:{code, message, details}}` with its HTTP status.
 */
const envelope = <Tag extends string, C extends ErrorCode, A>(
  self: Schema.Schema<A, { readonly _tag: Tag; readonly code: C; readonly message: string; readonly details?: Details }>,
  tag: Tag,
  code: Schema.Schema<C>,
  status: number
) =>
  Schema.transform(
    Schema.Struct({
      success: Schema.Literal(false),
      error: Schema.Struct({ code, message: Schema.String, details: Schema.optionalWith(Details, { exact: true }) })
    }),
    self,
    {
      strict: true,
      decode: ({ error }) => ({ _tag: tag, ...error }),
      encode: ({ _tag, ...error }) => ({ success: false as const, error })
    }
  ).annotations(HttpApiSchema.annotations({ status }))

export class BadRequest extends Schema.TaggedError<BadRequest>()(
  "BadRequest",
  fields("VALIDATION_ERROR", "INVALID_JSON", "DEPTH_LIMIT", "CIRCULAR_DEPENDENCY")
) {}
export const BadRequestResponse = envelope(BadRequest, "BadRequest", BadRequest.fields.code, 400)

export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  fields("AUTH_REQUIRED", "AUTH_MALFORMED", "AUTH_EXPIRED", "AUTH_FUTURE_TIMESTAMP", "AUTH_INVALID_SIGNATURE", "AUTH_SIGNATURE_REUSED", "WALLET_PROOF_INVALID", "WALLET_PROOF_EXPIRED", "PAYER_AUTH_REQUIRED", "PAYER_SIGNATURE_INVALID", "OPERATOR_AUTH_REQUIRED", "METRICS_AUTH_REQUIRED", "CLIENT_ID_REQUIRED", "CHAIN_TOKEN_INVALID", "CHAIN_TOKEN_EXPIRED")
) {}
export const UnauthorizedResponse = envelope(Unauthorized, "Unauthorized", Unauthorized.fields.code, 401)

export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  fields("AUTH_WRONG_AGENT", "AUTH_WALLET_MISMATCH", "WALLET_NOT_CONTROLLED", "AGENT_SUSPENDED", "AGENT_PAUSED_BY_OPERATOR", "WITHDRAWAL_AUTHORIZATION_REQUIRED", "RETRY_NOT_AUTHORIZED", "RECEIPT_NOT_AUTHORIZED", "NOT_TRANSACTION_PAYER", "DISPUTE_RATE_EXCEEDED", "RATING_NOT_AUTHORIZED", "CHAIN_DISABLED", "AGENT_NOT_CHAINABLE")
) {}
export const ForbiddenResponse = envelope(Forbidden, "Forbidden", Forbidden.fields.code, 403)

export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  fields("NOT_FOUND", "AGENT_NOT_FOUND", "CAPABILITY_NOT_FOUND", "EXECUTION_NOT_FOUND", "TRANSACTION_NOT_FOUND", "WITHDRAWAL_NOT_FOUND", "DISPUTE_NOT_FOUND", "WEBHOOK_NOT_FOUND", "CHAIN_NOT_FOUND", "ACTOR_NOT_FOUND", "REFUND_NOT_FOUND", "RECEIPT_NOT_FOUND", "SPENDING_LIMITS_NOT_FOUND", "CHANNEL_NOT_FOUND")
) {}
export const NotFoundResponse = envelope(NotFound, "NotFound", NotFound.fields.code, 404)

export class Conflict extends Schema.TaggedError<Conflict>()(
  "Conflict",
  fields(
    "WALLET_ALREADY_REGISTERED",
    "IDEMPOTENCY_CONFLICT",
    "EXECUTION_NOT_RETRYABLE",
    "INSUFFICIENT_BALANCE",
    "INSUFFICIENT_CREDIT",
    "DISPUTE_EXISTS",
    "DISPUTE_WINDOW_CLOSED",
    "TRANSACTION_NOT_DISPUTABLE",
    "DISPUTE_CLOSED",
    "DISPUTE_ALREADY_RESPONDED",
    "EVIDENCE_LIMIT_REACHED",
    "RATING_NOT_ALLOWED",
    "WEBHOOK_LIMIT_REACHED",
    "DELIVERY_ALREADY_REQUEUED",
    "LEVER_NOT_APPLICABLE"
  )
) {}
export const ConflictResponse = envelope(Conflict, "Conflict", Conflict.fields.code, 409)

export class ChainTimeout extends Schema.TaggedError<ChainTimeout>()("ChainTimeout", fields("CHAIN_TIMEOUT")) {}
export const ChainTimeoutResponse = envelope(ChainTimeout, "ChainTimeout", ChainTimeout.fields.code, 408)

/** 402 for a chained call: the chain's budget, not a payment, falls short (no x402 challenge: nothing can be paid here). */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", fields("BUDGET_EXCEEDED")) {}
export const BudgetExceededResponse = envelope(BudgetExceeded, "BudgetExceeded", BudgetExceeded.fields.code, 402)

export class LengthRequired extends Schema.TaggedError<LengthRequired>()("LengthRequired", fields("LENGTH_REQUIRED")) {}
export const LengthRequiredResponse = envelope(LengthRequired, "LengthRequired", LengthRequired.fields.code, 411)

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields("PAYLOAD_TOO_LARGE")) {}
export const PayloadTooLargeResponse = envelope(PayloadTooLarge, "PayloadTooLarge", PayloadTooLarge.fields.code, 413)

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  fields("UNSUPPORTED_MEDIA_TYPE")
) {}
export const UnsupportedMediaTypeResponse = envelope(UnsupportedMediaType, "UnsupportedMediaType", UnsupportedMediaType.fields.code, 415)

export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields("INTERNAL_ERROR")) {}
export const InternalErrorResponse = envelope(InternalError, "InternalError", InternalError.fields.code, 500)

export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", fields("RATE_LIMITED", "DISPUTE_LIMIT_REACHED", "OPERATOR_AUTH_THROTTLED", "QUOTE_RATE_LIMITED")) {}
export const RateLimitedResponse = envelope(RateLimited, "RateLimited", RateLimited.fields.code, 429)

export class Unavailable extends Schema.TaggedError<Unavailable>()(
  "Unavailable",
  fields("AGENT_UNAVAILABLE", "SERVICE_UNAVAILABLE", "QUOTE_BUSY")
) {}
export const UnavailableResponse = envelope(Unavailable, "Unavailable", Unavailable.fields.code, 503)

export class BadGateway extends Schema.TaggedError<BadGateway>()(
  "BadGateway",
  fields("EXECUTION_FAILED", "SETTLEMENT_FAILED", "QUOTE_FAILED")
) {}
export const BadGatewayResponse = envelope(BadGateway, "BadGateway", BadGateway.fields.code, 502)

export class GatewayTimeout extends Schema.TaggedError<GatewayTimeout>()(
  "GatewayTimeout",
  fields("EXECUTION_TIMEOUT")
) {}
export const GatewayTimeoutResponse = envelope(GatewayTimeout, "GatewayTimeout", GatewayTimeout.fields.code, 504)

/**
 * 402: payment missing or refused. On the wire it is at once an x402 v1 challenge
 * (`x402Version`, `accepts`) and our envelope (`success:false`, `error:{code:"PAYMENT_REQUIRED", ...}`).
 * x402 v1 clients read only `x402Version` and `accepts`, so the envelope owns `error`.
 */
export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", {
  message: Schema.String,
  details: Details,
  accepts: Schema.Array(PaymentRequirements),
  /** Offers only x402 v2 can carry (a `batch-settlement` channel): appended to the v2 challenge's `accepts`, never to v1's. */
  offersV2: Schema.optional(Schema.Array(PaymentRequirementsV2))
}) {}
export const PaymentRequiredResponse = Schema.transform(
  Schema.Struct({
    x402Version: Schema.Literal(1),
    success: Schema.Literal(false),
    error: Schema.Struct({ code: Schema.Literal("PAYMENT_REQUIRED"), message: Schema.String, details: Details }),
    accepts: Schema.Array(PaymentRequirements)
  }),
  PaymentRequired,
  {
    strict: true,
    decode: ({ accepts, error }) => ({ _tag: "PaymentRequired" as const, message: error.message, details: error.details, accepts }),
    encode: ({ accepts, details, message }) => ({
      x402Version: 1 as const,
      success: false as const,
      error: { code: "PAYMENT_REQUIRED" as const, message, details },
      // x402 v1 clients parse every entry and fail on a network they cannot name (Ethereum): v2 challenges offer those.
      accepts: accepts.filter((a) => isX402V1Network(a.network))
    })
  }
).annotations(HttpApiSchema.annotations({ status: 402 }))

/** The error classes (with their wire schemas), for the registry test and the API-wide error list. */
export const ErrorClasses = [
  [BadRequest, BadRequestResponse],
  [Unauthorized, UnauthorizedResponse],
  [Forbidden, ForbiddenResponse],
  [NotFound, NotFoundResponse],
  [Conflict, ConflictResponse],
  [ChainTimeout, ChainTimeoutResponse],
  [BudgetExceeded, BudgetExceededResponse],
  [LengthRequired, LengthRequiredResponse],
  [PayloadTooLarge, PayloadTooLargeResponse],
  [UnsupportedMediaType, UnsupportedMediaTypeResponse],
  [InternalError, InternalErrorResponse],
  [RateLimited, RateLimitedResponse],
  [Unavailable, UnavailableResponse],
  [BadGateway, BadGatewayResponse],
  [GatewayTimeout, GatewayTimeoutResponse]
] as const
