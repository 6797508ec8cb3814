// Our `batch-settlement` entry of an x402 v2 402's `accepts`: the quote's price per request, paid to our treasury as the
// channel's receiver, with what the scheme's client needs in `extra` (the token's EIP-712 name and version, our
// receiver authorizer, the withdrawal delay a channel must carry, how deposits are authorized, the deposit we suggest).
// A corrective answer adds our `channelState` and last `voucherState` (voucher.ts).
import type { PaymentRequirementsV2 } from "../v2.js"
import type { OurChannelTerms } from "./channelConfig.js"
import type { ChannelStateExtra, VoucherStateExtra } from "./voucher.js"

export const BATCH_SETTLEMENT = "batch-settlement"

/** How many requests' worth a first deposit should cover when the payer's client asks us (`extra.minDeposit`). */
export const SUGGESTED_DEPOSIT_CALLS = 100n

export interface ChannelOfferInput {
  readonly terms: OurChannelTerms
  readonly caip2: string
  readonly amount: bigint
  readonly maxTimeoutSeconds: number
  readonly tokenDomain: { readonly name: string; readonly version: string }
  /**
   * Whether `extra.minDeposit` suggests SUGGESTED_DEPOSIT_CALLS requests' worth (a call's offer). A chain's budget is
   * offered without it: the official client would deposit the announced amount whatever its own policy, and 100 budgets
   * is far more than a chain needs; without a hint the payer's policy decides (official client: 5 × the amount, within
   * its spend cap).
   */
  readonly suggestDeposit: boolean
  readonly corrective?: { readonly channelState: ChannelStateExtra; readonly voucherState: VoucherStateExtra }
}

export const channelOffer = (input: ChannelOfferInput): PaymentRequirementsV2 => ({
  scheme: BATCH_SETTLEMENT,
  network: input.caip2,
  asset: input.terms.token,
  amount: input.amount.toString(),
  payTo: input.terms.receiver,
  maxTimeoutSeconds: input.maxTimeoutSeconds,
  extra: {
    name: input.tokenDomain.name,
    version: input.tokenDomain.version,
    assetTransferMethod: "eip3009",
    receiverAuthorizer: input.terms.receiverAuthorizer,
    withdrawDelay: input.terms.withdrawDelay,
    // A hint, not a rule: the official client deposits max(this, what the request needs).
    ...(input.suggestDeposit ? { minDeposit: (input.amount * SUGGESTED_DEPOSIT_CALLS).toString() } : {}),
    ...(input.corrective === undefined ? {} : { channelState: input.corrective.channelState, voucherState: input.corrective.voucherState })
  }
})

/** Whether a decoded PAYMENT-SIGNATURE's accepted requirement names the batch-settlement scheme (read before decoding the rest). */
export const namesBatchSettlement = (json: unknown): boolean => {
  if (typeof json !== "object" || json === null || !("accepted" in json)) return false
  const accepted = json.accepted
  return typeof accepted === "object" && accepted !== null && "scheme" in accepted && accepted.scheme === BATCH_SETTLEMENT
}
