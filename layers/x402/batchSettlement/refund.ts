// A cooperative refund request checked off chain: its zero-charge voucher passes the voucher rules (ceiling equal to
// what we charged), and the amount it asks back is available: at most the unclaimed escrow once its voucher is claimed
// (balance minus the voucher's ceiling); all of it when the payer names no amount.
import { Effect } from "effect"
import type { OurChannelTerms } from "./channelConfig.js"
import type { RefundPayload } from "./payloads.js"
import { type ChannelPayloadRejected, rejected } from "./reasons.js"
import { type ChainCheck, type ChannelState, type CorrectiveAnswer, verifyVoucher, type VoucherAccepted } from "./voucher.js"

export interface RefundVerified {
  readonly voucher: VoucherAccepted
  /** What goes back to the payer. */
  readonly amount: bigint
}

export const verifyRefund = (input: {
  readonly payload: RefundPayload
  readonly state: ChannelState
  readonly ours: OurChannelTerms
  readonly chain: ChainCheck
}): Effect.Effect<RefundVerified | CorrectiveAnswer, ChannelPayloadRejected> =>
  Effect.gen(function* () {
    const { channelConfig: config, voucher } = input.payload
    const outcome = yield* verifyVoucher({ kind: "refund", config, voucher, price: 0n, state: input.state, ours: input.ours, chain: input.chain })
    if (outcome._tag === "Corrective") return outcome
    const unclaimed = input.state.balance - outcome.newCumulative
    if (unclaimed <= 0n) return yield* rejected("invalid_batch_settlement_evm_refund_no_balance", "nothing in the channel is left to refund")
    const asked = input.payload.amount === undefined ? unclaimed : BigInt(input.payload.amount)
    if (asked === 0n || asked > unclaimed) {
      return yield* rejected("invalid_batch_settlement_evm_refund_amount_invalid", `the refund must be between 1 and ${unclaimed}`, {
        amount: asked.toString(),
        unclaimed: unclaimed.toString()
      })
    }
    return { voucher: outcome, amount: asked }
  }).pipe(Effect.withSpan("BatchSettlement.verifyRefund"))
