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

export const settleWithFacilitator = (p: VerifiedPayment, facilitatorUrl: string, paymentRequirements: PaymentRequirements) =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(`${facilitatorUrl.replace(/\/+$/, "")}/settle`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ x402Version: 1, paymentPayload: v1PayloadOf(p), paymentRequirements }),
        signal: AbortSignal.timeout(FACILITATOR_TIMEOUT_MS)
      })
      return (await response.json()) as { success?: boolean; transaction?: string; errorReason?: string }
    },
    catch: (error) => new SettlementError({ reason: "rpc_error", message: `facilitator /settle failed: ${String(error)}`, final: false })
  }).pipe(
    Effect.flatMap((body) =>
      body.success === true && typeof body.transaction === "string" && /^0x[0-9a-fA-F]{64}$/.test(body.transaction)
        ? Effect.succeed(body.transaction as Hex)
        : Effect.fail(
          new SettlementError({ reason: "settlement_failed", message: `facilitator refused: ${String(body.errorReason ?? "unknown").slice(0, 200)}`, final: true })
        )
    )
  )
