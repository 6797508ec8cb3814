// Pure mappings of an execution to the wire: the client's view (output and cost only with the payment header) and the
// result post sent to a callback URL.
import type { ExecutionView } from "../../src/domain/Execution.js"
import { formatUsdc } from "../../src/domain/Money.js"
import type { ExecutionRow } from "./Repo.js"
import { meteringView, type MeteringRow } from "./meteringView.js"

export type ViewRow = Pick<
  ExecutionRow,
  | "id" | "transactionId" | "status" | "output" | "executionTimeMs" | "agentFee" | "platformFee" | "price" | "settlementState" | "settlementTxHash"
  | "attempts" | "retryUntil" | "error" | "refundStatus" | "refundTxHash" | "paymentPurpose" | MeteringRow
> & Partial<Pick<ExecutionRow, "escrowStatus">>

export const settlementStatus = (state: ExecutionRow["settlementState"]) =>
  state === "settled" ? "settled" as const : state === "reserved" ? "settlement_pending" as const : "settlement_failed" as const

const cost = (row: Pick<ExecutionRow, "agentFee" | "platformFee" | "price">) => ({
  agentFee: formatUsdc(row.agentFee),
  platformFee: formatUsdc(row.platformFee),
  total: formatUsdc(row.price)
})

/** What a caller sees; `reveal` when it proved to hold the execution's payment header. Output only once settled. */
export const forClient = (row: ViewRow, reveal: boolean): ExecutionView => {
  const settled = row.settlementState === "settled"
  const showOutput = reveal && row.status === "completed" && settled && row.output !== null
  return {
    requestId: row.id,
    // The holder of the payment header needs it to dispute the call (POST /api/v1/disputes), whatever paid for it.
    ...(reveal ? { transactionId: row.transactionId } : {}),
    status: row.status,
    ...(showOutput ? { output: row.output } : {}),
    executionTime: row.executionTimeMs,
    ...(reveal ? { cost: cost(row) } : {}),
    settlement: { status: settlementStatus(row.settlementState), txHash: row.settlementTxHash },
    ...(row.paymentPurpose === "credit" ? { funding: "credit" as const } : row.paymentPurpose === "upto" ? { funding: "upto" as const } : {}),
    attempts: row.attempts,
    ...(row.retryUntil === null || row.status === "completed" ? {} : { retryUntil: row.retryUntil.toISOString() }),
    ...(row.error === null || row.status === "completed" ? {} : { error: row.error }),
    ...(row.refundStatus === null ? {} : { refund: { status: row.refundStatus, txHash: row.refundTxHash } }),
    // A failed call paid from credit: its price went back to the credit at once.
    ...(row.paymentPurpose === "credit" && row.escrowStatus === "returned" ? { refund: { status: "credited", txHash: null } } : {}),
    ...(reveal ? meteringView(row) : {}),
    ...(!reveal
      ? { message: "output and cost are returned only with the payment header used for this execution (its X-PAYMENT-USED value, sent as X-PAYMENT or PAYMENT-SIGNATURE)" }
      : row.status === "completed" && row.settlementState === "failed"
      ? { message: "the payment did not settle: the output is not released and nothing was charged" }
      : row.status === "completed" && !settled
      ? { message: "the output is released once the payment settles on chain" }
      : {})
  }
}

/** The result post to a callback URL, once a state gives the client something final to hear. */
export const forCallback = (row: Pick<ExecutionRow, "id" | "status" | "settlementState" | "output" | "executionTimeMs" | "agentFee" | "platformFee" | "price" | "error">) => ({
  requestId: row.id,
  status: row.status,
  output: row.status === "completed" && row.settlementState === "settled" ? row.output : null,
  executionTime: row.executionTimeMs,
  cost: cost(row),
  ...(row.error === null || row.status === "completed" ? {} : { error: row.error })
})

/** Machine states after which a callback's client has something final to hear. */
export const CALLBACK_STATES: ReadonlySet<string> = new Set([
  "completed.released", "completed.held", "completed.unpaid", "failed", "timeout", "refunded", "cancelled", "returned"
])
