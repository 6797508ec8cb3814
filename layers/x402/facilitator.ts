// Settlement through a standard x402 facilitator (POST /settle): when the treasury key is not ours to hold.
import { Effect } from "effect"
import type { Hex } from "viem"
import type { PaymentRequirements } from "./requirements.js"
import { SettlementError, type VerifiedPayment } from "./payment.js"

/** A facilitator settles before it answers; its answer is bounded in time. */
const FACILITATOR_TIMEOUT_MS = 120_000

export const settleWithFacilitator = (p: VerifiedPayment, facilitatorUrl: string, paymentRequirements: PaymentRequirements) =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(`${facilitatorUrl.replace(/\/+$/, "")}/settle`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ x402Version: 1, paymentPayload: p.payload, paymentRequirements }),
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
