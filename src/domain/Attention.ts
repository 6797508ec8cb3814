// What "needs attention" means on the wire (GET /api/v1/operator/attention): the kinds of trouble, one item per stuck or
// failing actor (amounts as 6-decimal USDC), and the count per kind.
import { Schema } from "effect"

export const ATTENTION_KINDS = [
  "execution_overdue",
  "payment_held",
  "settlement_retrying",
  "settlement_failed",
  "treasury_stuck",
  "refund_unconfirmed",
  "withdrawal_slow",
  "dispute_escalated",
  "dispute_due_soon",
  "webhook_switched_off",
  "delivery_dead",
  "circuit_open",
  "reconciliation_drift",
  "channel_claim_failed",
  "channel_withdrawing"
] as const
export type AttentionKind = (typeof ATTENTION_KINDS)[number]

export const AttentionKindSchema = Schema.Literal(...ATTENTION_KINDS).annotations({ identifier: "AttentionKind" })

export const AttentionItemView = Schema.Struct({
  kind: AttentionKindSchema,
  machine: Schema.NullOr(Schema.String),
  actorId: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  amount: Schema.String.annotations({ description: "USDC at stake, 6 decimals" }),
  since: Schema.String,
  cause: Schema.String,
  lever: Schema.NullOr(Schema.String),
  leverTarget: Schema.NullOr(Schema.String)
}).annotations({ identifier: "AttentionItem" })

export const AttentionReport = Schema.Struct({
  generatedAt: Schema.String,
  counts: Schema.Record({ key: AttentionKindSchema, value: Schema.Number }),
  items: Schema.Array(AttentionItemView)
}).annotations({ identifier: "AttentionReport" })
