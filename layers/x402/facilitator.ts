// Settlement through a standard x402 facilitator (POST /settle): when the treasury key is not ours to hold. It is always
// asked in x402 v1 terms: the EIP-3009 authorization is the same whichever version the payer spoke, and a stored
// payment (recovery after a crash) is settled again from its columns alone.
import { Effect } from "effect"
import type { Hex } from "viem"
import type { PaymentRequirements } from "./requirements.js"
import { type PaymentPayload, SettlementError, type VerifiedPayment } from "./payment.js"

/** The v1 X-PAYMENT payload carrying a verified payment's authorization. */
export const v1PayloadOf = (p: VerifiedPayment): PaymentPayload => ({
  x402Version: 1,
  scheme: "exact",
  network: p.network,
  payload: {
    signature: p.signature,
    authorization: {
      from: p.payer,
      to: p.payTo,
      value: p.amount.toString(),
      validAfter: p.validAfter.toString(),
      validBefore: p.validBefore.toString(),
      nonce: p.nonce
    }
  }
})

/** A facilitator settles before it answers; its answer is bounded in time. */
const FACILITATOR_TIMEOUT_MS = 120_000

/** What the facilitator answered: its HTTP status and, when it was JSON, the x402 settle response. */
interface FacilitatorAnswer {
  readonly status: number
  readonly body: { success?: boolean; transaction?: string; errorReason?: string } | undefined
}

const isTxHash = (s: unknown): s is Hex => typeof s === "string" && /^0x[0-9a-fA-F]{64}$/.test(s)

/**
 * A facilitator settles before it answers; its answer is bounded in time. Only its considered refusal (an x402 settle
 * response with `success: false`, or a 4xx other than 429) is final; a 5xx, a 429, an answer that is not JSON, a
 * timeout or a lost connection say nothing about the payment: transient. Either way the caller asks the chain.
 */
export const settleWithFacilitator = (p: VerifiedPayment, facilitatorUrl: string, paymentRequirements: PaymentRequirements) =>
  Effect.tryPromise({
    try: async (): Promise<FacilitatorAnswer> => {
      const response = await fetch(`${facilitatorUrl.replace(/\/+$/, "")}/settle`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ x402Version: 1, paymentPayload: v1PayloadOf(p), paymentRequirements }),
        signal: AbortSignal.timeout(FACILITATOR_TIMEOUT_MS)
      })
      const text = await response.text()
      let body: FacilitatorAnswer["body"]
      try {
        body = JSON.parse(text) as FacilitatorAnswer["body"]
      } catch {
        body = undefined
      }
      return { status: response.status, body }
    },
    catch: (error) => new SettlementError({ reason: "rpc_error", message: `facilitator /settle failed: ${String(error)}`, final: false })
  }).pipe(
    Effect.flatMap(({ status, body }) => {
      if (status === 200 && body?.success === true && isTxHash(body.transaction)) return Effect.succeed(body.transaction)
      const considered = (status === 200 && body?.success === false) || (status >= 400 && status < 500 && status !== 429)
      const why = body?.errorReason === undefined ? `HTTP ${status}` : `${String(body.errorReason).slice(0, 200)} (HTTP ${status})`
      return Effect.fail(
        new SettlementError({
          reason: considered ? "settlement_failed" : "rpc_error",
          message: `facilitator ${considered ? "refused" : "failed"}: ${why}`,
          final: considered
        })
      )
    })
  )
