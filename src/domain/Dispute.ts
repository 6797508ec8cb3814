// Wire schemas of disputes (spec sections 2 and 4): requests with the spec's limits, the dispute, evidence and timeline views.
import { Schema } from "effect"
import { PageQuery } from "./Withdrawal.js"

export const DisputeReason = Schema.Literal("quality", "non_delivery", "overcharge")
export const DisputeStatus = Schema.Literal("open", "escalated", "resolved_agent", "resolved_client", "resolved_split")
export const Resolution = Schema.Literal("resolved_agent", "resolved_client", "resolved_split")
const EvidenceType = Schema.Literal("text", "url", "screenshot")

const text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

export const OpenDisputeRequest = Schema.Struct({
  transactionId: text(100).annotations({ description: "The transaction id (tx_…) or the execution's request id (req_…)" }),
  reason: DisputeReason,
  evidence: Schema.optional(text(2000))
}).annotations({ identifier: "OpenDisputeRequest" })

export const RespondRequest = Schema.Struct({ response: text(2000) }).annotations({ identifier: "DisputeResponseRequest" })

/** Metadata is a small JSON object (at most 4,096 characters serialized). */
const Metadata = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
  Schema.filter((m) => JSON.stringify(m).length <= 4_096 || "metadata must be at most 4096 characters of JSON")
)

export const EvidenceRequest = Schema.Struct({
  evidenceType: EvidenceType,
  content: text(5000),
  metadata: Schema.optional(Metadata)
}).annotations({ identifier: "EvidenceRequest" })

export const ResolveRequest = Schema.Struct({
  resolution: Resolution,
  notes: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(2000)), { default: () => "" }),
  clientShareBps: Schema.optional(Schema.Int.pipe(Schema.between(1, 9_999))).annotations({
    description: "resolved_split only: the client's share of the price in basis points (default 5000 = half)"
  })
}).annotations({ identifier: "ResolveDisputeRequest" })

export const DisputeListQuery = Schema.Struct({ ...PageQuery.fields, status: Schema.optional(DisputeStatus) })

export const Dispute = Schema.Struct({
  id: Schema.String,
  transaction_id: Schema.String,
  escrow_id: Schema.String,
  client_id: Schema.String.annotations({
    description: "The client's public handle: `clh_` + the first 32 hex digits of sha256(its X-Client-Id). Never the X-Client-Id itself (a credential)."
  }),
  agent_id: Schema.String,
  reason: DisputeReason,
  client_evidence: Schema.NullOr(Schema.String),
  agent_response: Schema.NullOr(Schema.String),
  status: DisputeStatus,
  amount: Schema.String,
  client_refund: Schema.NullOr(Schema.String),
  respond_by: Schema.String,
  resolution_notes: Schema.NullOr(Schema.String),
  resolved_by: Schema.NullOr(Schema.String),
  escalated_at: Schema.NullOr(Schema.String),
  escalation_reason: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
  resolved_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Dispute" })

export const DisputeOpened = Schema.Struct({
  disputeId: Schema.String,
  transactionId: Schema.String,
  agentId: Schema.String,
  reason: DisputeReason,
  status: Schema.Literal("open"),
  respondBy: Schema.String,
  message: Schema.String
}).annotations({ identifier: "DisputeOpened" })

export const DisputeListItem = Schema.Struct({
  id: Schema.String,
  transaction_id: Schema.String,
  status: DisputeStatus,
  reason: DisputeReason,
  client_evidence: Schema.NullOr(Schema.String),
  agent_response: Schema.NullOr(Schema.String),
  created_at: Schema.String
})

export const AgentDisputes = Schema.Struct({
  disputes: Schema.Array(DisputeListItem),
  summary: Schema.Struct({ total: Schema.Number, open: Schema.Number, won: Schema.Number, lost: Schema.Number }),
  pagination: Schema.Struct({ limit: Schema.Number, offset: Schema.Number })
}).annotations({ identifier: "AgentDisputes" })

export const DisputeAnswer = Schema.Struct({ disputeId: Schema.String, message: Schema.String })

export const EvidenceAccepted = Schema.Struct({
  evidenceId: Schema.String,
  disputeId: Schema.String,
  submittedBy: Schema.Literal("agent", "client"),
  evidenceType: EvidenceType,
  message: Schema.String
})

export const EvidenceList = Schema.Struct({
  disputeId: Schema.String,
  evidence: Schema.Array(Schema.Struct({
    id: Schema.String,
    submitted_by: Schema.Literal("agent", "client"),
    evidence_type: EvidenceType,
    content: Schema.String,
    metadata: Schema.NullOr(Schema.Unknown),
    created_at: Schema.String
  }))
})

export const Timeline = Schema.Struct({
  disputeId: Schema.String,
  timeline: Schema.Array(Schema.Struct({
    id: Schema.String,
    event_type: Schema.Literal("opened", "evidence_submitted", "escalated", "resolved"),
    actor: Schema.String,
    details: Schema.Unknown,
    created_at: Schema.String
  }))
})

export const OperatorDisputes = Schema.Struct({
  disputes: Schema.Array(Dispute),
  pagination: Schema.Struct({ total: Schema.Number, limit: Schema.Number, offset: Schema.Number })
}).annotations({ identifier: "OperatorDisputes" })
