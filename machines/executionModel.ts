// What one paid execution's machine (machines/execution.ts) knows and hears: its context, its events and durable
// timers, and the status the API shows for a state of it.

export type PaymentStatus = "pending" | "settled" | "failed"

export interface ExecutionContext {
  readonly retryWindowMs: number
  /** Agent timeout plus grace: when a running attempt is declared dead if no result was recorded. */
  readonly deadlineMs: number
  readonly startedAt: number
  readonly attempts: number
  /** First failure + retryWindowMs: retries allowed before, refund after. */
  readonly retryUntil: number | null
  readonly failureKind: "failed" | "timeout" | null
  readonly payment: PaymentStatus
  /** The retry window closed while the settlement was still pending: refund as soon as it settles. */
  readonly windowClosed: boolean
  readonly completedAt: number | null
  /** Outcomes (success?) waiting for the payment to settle before they count for reputation and health. */
  readonly unscored: ReadonlyArray<boolean>
  /** Settlement delay of the agent's trust tier at completion (0: instant). */
  readonly releaseDelayMs: number
  readonly releaseAt: number | null
  /** A sub-call inside a chain: paid from the chain's budget, which a failure gives back at once (no retry, no refund). */
  readonly chained: boolean
  /** Paid from the payer's credit: a failure gives the price back to the credit at once (no retry window, no refund). */
  readonly credit: boolean
  /**
   * A fact, not the machine's own: the agent is suspended (its host reads the agent's status under the row lock at every
   * step). Its money is not released while it holds; reinstatement (AGENT_REINSTATED) re-arms the release.
   */
  readonly frozen: boolean
}

export type ExecutionEvent =
  /** `output` and `durationMs` are stored on the execution's row by the host (not in the snapshot or history). */
  | { readonly type: "AGENT_SUCCEEDED"; readonly at: number; readonly releaseDelayMs: number; readonly output?: unknown; readonly durationMs?: number }
  | {
    readonly type: "AGENT_FAILED"
    readonly at: number
    readonly timedOut: boolean
    readonly error: string
    readonly kind?: string
    readonly durationMs?: number
  }
  | { readonly type: "PAYMENT_SETTLED"; readonly at: number }
  | { readonly type: "PAYMENT_FAILED"; readonly at: number; readonly reason: string }
  | { readonly type: "RETRY"; readonly at: number }
  /** No result by the hard deadline (the process running the call died): treated as a timeout. */
  | { readonly type: "AGENT_DEADLINE"; readonly at: number }
  | { readonly type: "RETRY_WINDOW_CLOSED"; readonly at: number }
  | { readonly type: "RELEASE_DUE"; readonly at: number }
  /** `amount`: what the refund paid (micro-USDC digits; a dispute's split refunds part of the price). */
  | { readonly type: "REFUND_CONFIRMED"; readonly at: number; readonly txHash: string; readonly amount?: string }
  /** A dispute froze the money: held escrow stops its release, released earnings are taken back. */
  | { readonly type: "DISPUTE_OPENED"; readonly at: number; readonly disputeId: string }
  /**
   * The platform resolved the dispute: `clientShare` (micro-USDC digits) goes back to the payer, the rest is released.
   * `refundTo` says where a channel-paid call's share goes when it is not a wallet transfer (the default): `channel`,
   * off the unclaimed charge into the payer's channel balance; `writtenOff`, nowhere (the payer's money left the channel
   * unclaimed: the share reduces the write-off).
   */
  | { readonly type: "DISPUTE_RESOLVED"; readonly at: number; readonly disputeId: string; readonly clientShare: string; readonly refundTo?: DisputeRefundTo }
  /** Operator lever: the agent was reinstated; held money whose release was refused while it was suspended is due again. */
  | { readonly type: "AGENT_REINSTATED"; readonly at: number; readonly by: string; readonly reason: string }
  /** Operator lever: the pending refund (a failed attempt waiting for its next try) is sent at once. */
  | { readonly type: "REFUND_RETRY"; readonly at: number; readonly by: string; readonly reason: string }
  /** Operator decision on a suspended agent's frozen money: the held escrow goes back to the payer (the refund path). */
  | { readonly type: "OPERATOR_REFUND"; readonly at: number; readonly by: string; readonly reason: string }

/** Where a channel-paid call's client share goes when the money never reaches a wallet (see DISPUTE_RESOLVED). */
export type DisputeRefundTo = "channel" | "writtenOff"

export type TimerEvent = "RETRY_WINDOW_CLOSED" | "RELEASE_DUE" | "AGENT_DEADLINE"

/** The API status of an execution in a given machine state. */
export const executionStatus = (
  value: string,
  context: Pick<ExecutionContext, "failureKind">
): "pending" | "completed" | "failed" | "timeout" | "refunded" => {
  if (value === "running") return "pending"
  if (value.startsWith("completed")) return "completed"
  if (value === "refunded") return "refunded"
  // An operator refund of a completed call's frozen money (no failure): completed until the refund is mined.
  if (value === "refunding" && context.failureKind === null) return "completed"
  if (value === "timeout") return "timeout"
  if (value === "failed") return "failed"
  return context.failureKind ?? "failed"
}
