// Disputes on the wire (spec section 2): snake_case fields, amounts as 6-decimal strings, ISO times.
import { formatUsdc } from "../../src/domain/Money.js"
import type { DisputeRow, DisputeSummary, EvidenceRow, TimelineRow } from "./Repo.js"

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

/** `clientHandle`: the public handle of the client's id (`clh_…`), never the X-Client-Id itself (a credential). */
export const toDispute = (d: DisputeRow, clientHandle: string) => ({
  id: d.id,
  transaction_id: d.transactionId,
  escrow_id: d.escrowId,
  client_id: clientHandle,
  agent_id: d.agentId,
  reason: d.reason,
  client_evidence: d.clientEvidence,
  agent_response: d.agentResponse,
  status: d.status,
  amount: formatUsdc(d.amount),
  client_refund: d.clientRefund === null ? null : formatUsdc(d.clientRefund),
  respond_by: d.respondBy.toISOString(),
  resolution_notes: d.resolutionNotes,
  resolved_by: d.resolvedBy,
  escalated_at: iso(d.escalatedAt),
  escalation_reason: d.escalationReason,
  created_at: d.createdAt.toISOString(),
  updated_at: d.updatedAt.toISOString(),
  resolved_at: iso(d.resolvedAt)
})

export const toOpened = (d: DisputeRow) => ({
  disputeId: d.id,
  transactionId: d.transactionId,
  agentId: d.agentId,
  reason: d.reason,
  status: "open" as const,
  respondBy: d.respondBy.toISOString(),
  message: `Dispute opened; the payment is frozen. The agent has 48 hours (until ${d.respondBy.toISOString()}) to respond, then the dispute is escalated to the platform.`
})

export const toAgentList = (rows: ReadonlyArray<DisputeRow>, summary: DisputeSummary, limit: number, offset: number) => ({
  disputes: rows.map((d) => ({
    id: d.id,
    transaction_id: d.transactionId,
    status: d.status,
    reason: d.reason,
    client_evidence: d.clientEvidence,
    agent_response: d.agentResponse,
    created_at: d.createdAt.toISOString()
  })),
  summary,
  pagination: { limit, offset }
})

export const toEvidence = (disputeId: string, rows: ReadonlyArray<EvidenceRow>) => ({
  disputeId,
  evidence: rows.map((e) => ({
    id: e.id,
    submitted_by: e.submittedBy,
    evidence_type: e.evidenceType,
    content: e.content,
    metadata: e.metadata,
    created_at: e.createdAt.toISOString()
  }))
})

export const toTimeline = (disputeId: string, rows: ReadonlyArray<TimelineRow>) => ({
  disputeId,
  timeline: rows.map((t) => ({ id: t.id, event_type: t.eventType, actor: t.actor, details: t.details, created_at: t.createdAt.toISOString() }))
})
