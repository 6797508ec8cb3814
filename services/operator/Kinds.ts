// Where each persisted machine kind keeps its actors (table, state, snapshot, what an operator is shown), so one generic
// inspection serves every kind; a kind missing here is a type error (the record is keyed by MachineKind).
import type { AnyStateMachine } from "xstate"
import { chainMachine } from "../../machines/chain.js"
import { channelMachine } from "../../machines/channel.js"
import { circuitMachine } from "../../machines/circuit.js"
import { disputeMachine } from "../../machines/dispute.js"
import { executionMachine } from "../../machines/execution.js"
import type { MachineKind } from "../../machines/Host.js"
import { settlementMachine } from "../../machines/settlement.js"
import { treasuryTxMachine } from "../../machines/treasuryTx.js"
import { deliveryMachine } from "../../machines/webhookDelivery.js"
import { withdrawalMachine } from "../../machines/withdrawal.js"

/**
 * SQL over the actor's row, aliased `t`. Every string here is a constant of this module (never input): the inspection
 * splices them in as SQL; values always travel as parameters.
 */
export interface KindTable {
  readonly table: string
  readonly idType: "text" | "uuid"
  /** The actor's machine state ("completed.held" for nested states). */
  readonly state: string
  readonly snapshot: string
  /** When the actor was created: the list's order (newest first) and its cursor. */
  readonly created: string
  /** Rows that are not actors (an agent still paying for its registration has no circuit yet). */
  readonly where?: string
  /** What the operator sees besides the snapshot, as text (amounts in micro-USDC, times as timestamps); no secrets. */
  readonly summary: ReadonlyArray<readonly [name: string, expression: string]>
  /** A due time kept on the row instead of in machine_timers: the worker that reads it is this machine's timer. */
  readonly workerTimer?: { readonly event: string; readonly due: string }
  /** Every state of the machine (counts list them all, zeros included). */
  readonly states: ReadonlyArray<string>
}

/** The leaf states of a machine, as the host writes them ("completed.held"). */
const leafStates = (machine: AnyStateMachine): ReadonlyArray<string> => {
  const walk = (node: { readonly key: string; readonly states: Record<string, unknown> }, prefix: string): Array<string> => {
    const children = Object.values(node.states).filter(
      (child): child is { readonly key: string; readonly states: Record<string, unknown> } =>
        typeof child === "object" && child !== null && "key" in child && "states" in child
    )
    const path = prefix === "" ? node.key : `${prefix}.${node.key}`
    return children.length === 0 ? [path] : children.flatMap((child) => walk(child, path))
  }
  return Object.values(machine.root.states).flatMap((child) => walk(child, ""))
}

const text = (...columns: ReadonlyArray<readonly [string, string]>) => columns

export const KINDS: { readonly [K in MachineKind]: KindTable } = {
  execution: {
    table: "executions",
    idType: "text",
    state: "t.state",
    snapshot: "t.machine_snapshot",
    created: "t.created_at",
    summary: text(
      ["status", "t.status"],
      ["agentId", "t.agent_id"],
      ["agentStatus", "(SELECT a.status FROM agents a WHERE a.id = t.agent_id)"],
      ["payer", "t.payer"],
      ["capabilityId", "t.capability_id"],
      ["transactionId", "t.transaction_id"],
      ["paymentId", "t.payment_id"],
      ["price", "t.price"],
      ["attempts", "t.attempts"],
      ["error", "t.error"],
      ["escrowId", "t.escrow_id"],
      ["escrowStatus", "(SELECT s.status FROM escrows s WHERE s.execution_id = t.id)"],
      ["refundId", "(SELECT r.id FROM refunds r WHERE r.execution_id = t.id)"],
      ["refundStatus", "(SELECT r.status FROM refunds r WHERE r.execution_id = t.id)"],
      ["refundLastError", "(SELECT r.last_error FROM refunds r WHERE r.execution_id = t.id)"],
      ["chainId", "t.chain_id"],
      ["depth", "t.depth"],
      ["updatedAt", "t.updated_at"]
    ),
    workerTimer: { event: "REFUND_ATTEMPT", due: "(SELECT r.next_attempt_at FROM refunds r WHERE r.execution_id = t.id AND r.status = 'pending')" },
    states: leafStates(executionMachine)
  },
  settlement: {
    table: "payments",
    idType: "text",
    state: "t.status",
    snapshot: "t.machine_snapshot",
    created: "t.created_at",
    summary: text(
      ["purpose", "t.purpose"],
      ["subjectId", "t.subject_id"],
      ["payer", "t.payer"],
      ["amount", "t.amount"],
      ["txHash", "t.tx_hash"],
      ["failureReason", "t.failure_reason"],
      ["attempts", "t.attempts"],
      ["treasuryTxId", "t.treasury_tx_id"],
      ["updatedAt", "t.updated_at"]
    ),
    // The recovery worker takes the payment over at this time (its lease ran out, or its retry is due).
    workerTimer: { event: "RECOVERY", due: "CASE WHEN t.status IN ('reserved', 'retrying') THEN t.next_attempt_at END" },
    states: leafStates(settlementMachine)
  },
  circuit: {
    table: "agents",
    idType: "uuid",
    state: "t.circuit_state",
    snapshot: "t.circuit_snapshot",
    created: "t.created_at",
    where: "t.status <> 'pending'",
    summary: text(["name", "t.name"], ["agentStatus", "t.status"], ["healthScore", "t.health_score"], ["updatedAt", "t.updated_at"]),
    states: leafStates(circuitMachine)
  },
  treasury: {
    table: "treasury_txs",
    idType: "text",
    state: "t.state",
    snapshot: "t.machine_snapshot",
    created: "t.created_at",
    summary: text(
      ["purpose", "t.purpose"],
      ["subjectId", "t.subject_id"],
      ["nonce", "t.nonce"],
      ["txHash", "t.tx_hash"],
      ["blockNumber", "t.block_number"],
      ["lastError", "t.last_error"],
      ["attempts", "t.attempts"],
      ["updatedAt", "t.updated_at"]
    ),
    // The treasury worker observes (rebroadcasts, records) an unfinished transaction once its lease ran out.
    workerTimer: { event: "OBSERVE", due: "CASE WHEN t.state IN ('signed', 'broadcast') THEN t.lease_until END" },
    states: leafStates(treasuryTxMachine)
  },
  withdrawal: {
    table: "withdrawals",
    idType: "text",
    state: "t.status",
    snapshot: "t.machine_snapshot",
    created: "t.created_at",
    summary: text(
      ["agentId", "t.agent_id"],
      ["amount", "t.amount"],
      ["fee", "t.fee"],
      ["netAmount", "t.net_amount"],
      ["destinationWallet", "t.destination_wallet"],
      ["treasuryTxId", "t.treasury_tx_id"],
      ["txHash", "t.tx_hash"],
      ["lastError", "t.last_error"],
      ["completedAt", "t.completed_at"]
    ),
    workerTimer: { event: "PAYOUT", due: "CASE WHEN t.status = 'pending' THEN t.next_attempt_at END" },
    states: leafStates(withdrawalMachine)
  },
  dispute: {
    table: "disputes",
    idType: "text",
    state: "t.status",
    snapshot: "t.machine_snapshot",
    created: "t.created_at",
    summary: text(
      ["executionId", "t.execution_id"],
      ["transactionId", "t.transaction_id"],
      ["agentId", "t.agent_id"],
      ["clientWallet", "t.client_wallet"],
      ["reason", "t.reason"],
      ["amount", "t.amount"],
      ["respondBy", "t.respond_by"],
      ["resolvedBy", "t.resolved_by"],
      ["updatedAt", "t.updated_at"]
    ),
    states: leafStates(disputeMachine)
  },
  webhookDelivery: {
    table: "webhook_deliveries",
    idType: "text",
    state: "t.status",
    snapshot: "t.machine_snapshot",
    created: "t.created_at",
    summary: text(
      ["subscriptionId", "t.subscription_id"],
      ["eventId", "t.event_id"],
      ["eventType", "t.event_type"],
      ["attemptCount", "t.attempt_count"],
      ["responseStatus", "t.response_status"],
      // Why the last attempt failed (the receiver's status or the connection error), so a dead delivery says why it died.
      ["lastError", "(SELECT coalesce(a.error_message, 'HTTP ' || a.response_status) FROM webhook_attempts a WHERE a.delivery_id = t.id AND (a.response_status IS NULL OR a.response_status NOT BETWEEN 200 AND 299) ORDER BY a.attempt_number DESC LIMIT 1)"],
      ["requeuedFrom", "t.requeued_from"],
      ["deadLetterId", "(SELECT d.id FROM webhook_dead_letters d WHERE d.delivery_id = t.id)"],
      ["requeuedAt", "(SELECT d.requeued_at FROM webhook_dead_letters d WHERE d.delivery_id = t.id)"],
      ["deliveredAt", "t.delivered_at"]
    ),
    // The sender posts the next attempt at this time.
    workerTimer: { event: "ATTEMPT", due: "CASE WHEN t.status = 'pending' THEN t.next_attempt_at END" },
    states: leafStates(deliveryMachine)
  },
  chain: {
    table: "chains",
    idType: "uuid",
    // The machine ends in one state; the row's status says how (completed, failed, partial).
    state: "CASE WHEN t.status IN ('pending', 'running') THEN t.status ELSE 'ended' END",
    snapshot: "t.machine_snapshot",
    created: "t.started_at",
    summary: text(
      ["status", "t.status"],
      ["rootExecutionId", "t.root_execution_id"],
      ["rootAgentId", "t.root_agent_id"],
      ["payer", "t.payer"],
      ["totalBudget", "t.total_budget"],
      ["remaining", "t.remaining"],
      ["refundAmount", "t.refund_amount"],
      ["completedAt", "t.completed_at"]
    ),
    states: leafStates(chainMachine)
  },
  channel: {
    table: "channels",
    idType: "text",
    state: "t.status",
    snapshot: "t.machine_snapshot",
    created: "t.created_at",
    summary: text(
      ["network", "t.network"],
      ["payer", "t.payer"],
      ["balance", "t.balance"],
      ["chargedCumulative", "t.charged_cumulative"],
      ["claimedCumulative", "t.claimed_cumulative"],
      ["claimedOnChain", "t.claimed_on_chain"],
      ["settledCumulative", "t.settled_cumulative"],
      ["writtenOff", "t.written_off"],
      ["finalizableAt", "t.finalizable_at"],
      ["lastDeposit", "(SELECT d.status || ' ' || d.amount FROM channel_deposits d WHERE d.channel_id = t.id ORDER BY d.created_at DESC LIMIT 1)"],
      ["updatedAt", "t.updated_at"]
    ),
    // The claims worker claims the channel at this time (a withdrawal started: everything charged must be claimed first).
    workerTimer: { event: "CLAIM", due: "t.claim_due_at" },
    states: leafStates(channelMachine)
  }
}
