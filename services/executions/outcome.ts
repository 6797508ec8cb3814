// What the paid-call pipeline answers, and what its caller says about the request beside the funding.
import type { ExecutionView } from "../../src/domain/Execution.js"
import type { RemainderTo } from "./metering.js"
import type { LimitsSeen } from "./RateLimits.js"
import type { ExecutionReceipt } from "./receipt.js"

export interface ExecuteContext {
  readonly async: boolean
  /** Where the rate-limit windows are noted once counted, for X-RateLimit-* on whatever answer follows. */
  readonly limits?: LimitsSeen | undefined
  /**
   * The caller's address (the proxy's X-Forwarded-For only with TRUST_PROXY): who an unpaid request's quote counts
   * against (quoteAdmission.ts). None (MCP): an unpaid request asks no quote.
   */
  readonly client?: string | undefined
  /** X-Remainder: where a metered call's unused authorisation goes (default: back on chain). */
  readonly remainder?: RemainderTo | undefined
}

/** What the HTTP layer turns into headers: the accepted payment and its settlement (the windows: ExecuteContext.limits). */
export interface PaymentUse {
  /** The credential's text (X-PAYMENT-USED), and the x402 version and network name the receipt speaks. */
  readonly header: string
  readonly version: 1 | 2
  readonly payer: string
  readonly network: string
  readonly settlementTxHash: string | null
  /** The payer's signed receipt (receipt.ts), once the call completed and its payment settled; null otherwise. */
  readonly receipt: ExecutionReceipt | null
  /**
   * Paid from the payer's credit (X-Credit-Payment): no settlement; the receipt travels in X-Credit-Receipt. Paid by a
   * batch-settlement channel: no settlement per call; PAYMENT-RESPONSE says what the channel was charged (`channel`).
   */
  readonly funding?: "credit" | "channel" | "upto"
  readonly channel?: ChannelUse
  /** Paid by an upto authorization: its maximum and what the call used (what settled; 0 for a failed call). */
  readonly upto?: UptoUse
}

export interface UptoUse {
  readonly maximum: bigint
  readonly charged: bigint
}

/** What a voucher-paid call took from its channel, as the scheme's client reads it from PAYMENT-RESPONSE. */
export interface ChannelUse {
  readonly channelId: string
  /** This call's charge: its price, what a metered call used, or 0 for a failed call. */
  readonly chargedAmount: bigint
  /** The channel's charged cumulative as the payer's next voucher builds on it (its base plus this charge). */
  readonly chargedCumulative: bigint
}

export type ExecuteOutcome =
  /** `payment` is null for a sub-call inside a chain (its chain's budget paid). */
  | { readonly _tag: "Done"; readonly view: ExecutionView; readonly payment: PaymentUse | null }
  | { readonly _tag: "Accepted"; readonly requestId: string; readonly jobId: string | undefined; readonly statusUrl: string; readonly payment: PaymentUse }
