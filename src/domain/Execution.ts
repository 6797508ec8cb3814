// The execution request and the views of executions and their money on the wire.
import { Schema } from "effect"
import { HttpUrl } from "./Agent.js"
import { AgentId } from "./Ids.js"

export const ExecuteRequest = Schema.Struct({
  targetAgentId: AgentId,
  capabilityId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  callbackUrl: Schema.optionalWith(HttpUrl, { exact: true }),
  webhookUrl: Schema.optionalWith(HttpUrl, { exact: true }),
  idempotencyKey: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)), { exact: true })
}).annotations({ identifier: "ExecuteRequest", parseOptions: { errors: "all" } })
export type ExecuteRequest = typeof ExecuteRequest.Type

export const Cost = Schema.Struct({
  agentFee: Schema.String,
  platformFee: Schema.String,
  total: Schema.optional(Schema.String)
}).annotations({ identifier: "Cost" })

export const SettlementView = Schema.Struct({
  status: Schema.Literal("settled", "settlement_pending", "settlement_failed"),
  txHash: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Settlement" })

export const ExecutionStatus = Schema.Literal("pending", "completed", "failed", "timeout", "refunded")

/** A chained call's place in its chain (spec section 2): the token in `childToken` pays for the caller's next sub-call. */
export const ChainInfo = Schema.Struct({
  chainId: Schema.String,
  depth: Schema.Number,
  remainingBudget: Schema.String,
  childToken: Schema.String,
  /**
   * A sub-call's read-back handle, in the answer that made the call only: send it as X-PAYMENT on
   * GET /api/v1/execute/:requestId to read the result again (docs/chains.md). The chain's payer reads with the root's.
   */
  readHandle: Schema.optional(Schema.String),
  /** The root's response: the chain's status, and once it ended, the unspent budget refunded to the payer on chain. */
  status: Schema.optional(Schema.String),
  refunded: Schema.optional(Schema.String)
}).annotations({ identifier: "ExecutionChain" })

/** How the newest post to an execution's callback URL went (GET /execute/:requestId with the payment header). */
export const CallbackView = Schema.Struct({
  deliveryId: Schema.String,
  event: Schema.String,
  status: Schema.Literal("pending", "delivered", "dead", "superseded"),
  attempts: Schema.Number,
  lastResponseStatus: Schema.NullOr(Schema.Number),
  lastAttemptAt: Schema.optional(Schema.String),
  lastError: Schema.optional(Schema.String),
  nextAttemptAt: Schema.optional(Schema.String),
  deliveredAt: Schema.optional(Schema.String)
}).annotations({ identifier: "ExecutionCallback" })
export type CallbackView = typeof CallbackView.Type

/** An execution as answered by POST /execute, the retry and GET /execute/:requestId. */
/** A metered call's usage and charge (docs/agent-requests.md "Metered pricing"); amounts in USDC. */
export const MeteringView = Schema.Struct({
  unit: Schema.String,
  /** Null until the agent answered. */
  unitsUsed: Schema.NullOr(Schema.String),
  unitPrice: Schema.String,
  /** The usage was above the maximum and was cut to it. */
  capped: Schema.Boolean,
  authorized: Schema.String,
  /** A dynamic capability's quote (agent fee) accepted before payment. */
  quote: Schema.optional(Schema.String),
  charged: Schema.NullOr(Schema.String),
  returned: Schema.NullOr(Schema.String),
  remainder: Schema.Struct({ to: Schema.String, status: Schema.NullOr(Schema.String), txHash: Schema.NullOr(Schema.String) })
}).annotations({ identifier: "ExecutionMetering" })

export const ExecutionView = Schema.Struct({
  requestId: Schema.String,
  status: ExecutionStatus,
  output: Schema.optional(Schema.Unknown),
  executionTime: Schema.NullOr(Schema.Number),
  cost: Schema.optional(Cost),
  settlement: SettlementView,
  attempts: Schema.Number,
  retryUntil: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  refund: Schema.optional(Schema.Struct({ status: Schema.String, txHash: Schema.NullOr(Schema.String) })),
  message: Schema.optional(Schema.String),
  /** For the holder of the payment header (and on every chained call): the transaction id (tx_…) a dispute names. */
  transactionId: Schema.optional(Schema.String),
  chain: Schema.optional(ChainInfo),
  /** Executions with a callbackUrl/webhookUrl, for the holder of the payment header: how the result post went. */
  callback: Schema.optional(CallbackView),
  /** Metered capabilities, for the holder of the payment header: the usage charged and where the remainder went. */
  metering: Schema.optional(MeteringView),
  /** Calls paid from the payer's credit (X-Credit-Payment): `credit`; no settlement transaction, refunds go to the credit. */
  funding: Schema.optional(Schema.Literal("credit", "upto"))
}).annotations({ identifier: "Execution" })
export type ExecutionView = typeof ExecutionView.Type

export const Accepted = Schema.Struct({
  jobId: Schema.optional(Schema.String),
  requestId: Schema.String,
  status: Schema.Literal("pending"),
  statusUrl: Schema.String
}).annotations({ identifier: "AcceptedExecution" })
