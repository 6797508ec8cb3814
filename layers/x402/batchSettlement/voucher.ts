// A voucher checked off chain against the channel state we hold: the channel is ours, the voucher is the payer's, its
// cumulative ceiling is exactly what we charged so far plus this request's price (else the corrective answer the scheme
// describes, carrying our `channelState` and the last `voucherState`), and the channel's mirrored balance covers it.
import type { BatchSettlementPaymentRequirementsExtra } from "@x402/evm"
import { Effect, Either } from "effect"
import { type Hex, isAddressEqual, zeroAddress } from "viem"
import { checkChannelConfig, type OurChannelTerms } from "./channelConfig.js"
import type { ChannelConfig, VoucherFields } from "./payloads.js"
import { type ChannelPayloadRejected, rejected } from "./reasons.js"
import { type HashSignatureReader, verifyAccountSignature, verifyKeySignature } from "./signature.js"
import { voucherDigest, voucherTypedData } from "./typedData.js"

/** Our view of a channel: the on-chain fields mirrored, what we charged, and the last voucher we accepted. */
export interface ChannelState {
  /** Deposited minus withdrawn and refunded (mirrored from the contract). */
  readonly balance: bigint
  /** Claimed on chain so far (mirrored). */
  readonly totalClaimed: bigint
  /** What we charged on this channel in total; the next voucher must be this plus the price. */
  readonly chargedCumulative: bigint
  readonly withdrawRequestedAt: number
  readonly refundNonce: bigint
  /** The last voucher we accepted (none before the first). */
  readonly lastVoucher?: { readonly signedMaxClaimable: bigint; readonly signature: Hex }
}

/** What the 402's `accepts[].extra` carries to resynchronise a payer (@x402/evm's types, the spec's fields). */
export type ChannelStateExtra = NonNullable<BatchSettlementPaymentRequirementsExtra["channelState"]>
export type VoucherStateExtra = NonNullable<BatchSettlementPaymentRequirementsExtra["voucherState"]>

/** The payer signed another cumulative ceiling than ours: answer 402 with our state, so its client can re-sign. */
export interface CorrectiveAnswer {
  readonly _tag: "Corrective"
  readonly reason: "invalid_batch_settlement_evm_cumulative_amount_mismatch"
  readonly expectedMaxClaimable: bigint
  readonly channelState: ChannelStateExtra
  readonly voucherState: VoucherStateExtra
}

export interface VoucherAccepted {
  readonly _tag: "Accepted"
  /** The voucher's ceiling: our charged total once this request is charged in full. */
  readonly newCumulative: bigint
  /** What this voucher adds: the request's price (zero for a refund's voucher). */
  readonly amount: bigint
  readonly signedMaxClaimable: bigint
  readonly signature: Hex
}

/** `deposit` and `voucher` payloads pay for the request; a `refund`'s voucher is zero-charge. */
export type VoucherKind = "deposit" | "voucher" | "refund"

export const correctiveAnswer = (channelId: Hex, state: ChannelState, expectedMaxClaimable: bigint): CorrectiveAnswer => ({
  _tag: "Corrective",
  reason: "invalid_batch_settlement_evm_cumulative_amount_mismatch",
  expectedMaxClaimable,
  channelState: {
    channelId,
    balance: state.balance.toString(),
    totalClaimed: state.totalClaimed.toString(),
    withdrawRequestedAt: state.withdrawRequestedAt,
    refundNonce: state.refundNonce.toString(),
    chargedCumulativeAmount: state.chargedCumulative.toString()
  },
  voucherState: state.lastVoucher === undefined
    ? {}
    : { signedMaxClaimable: state.lastVoucher.signedMaxClaimable.toString(), signature: state.lastVoucher.signature }
})

/**
 * The cumulative rules, pure: the ceiling equals charged + price (charged alone for a refund), else the corrective
 * answer; then it must be covered by the balance (plus the deposit that comes with it) and lie above what was claimed
 * (at or above, for a refund). A replayed voucher (the last one accepted) fails the first rule and gets the corrective
 * answer.
 */
export const checkCumulative = (input: {
  readonly kind: VoucherKind
  readonly channelId: Hex
  readonly maxClaimable: bigint
  readonly price: bigint
  readonly state: ChannelState
  /** A deposit payload's amount, which lands in the channel before its voucher is claimed. */
  readonly depositAmount?: bigint
}): Either.Either<CorrectiveAnswer | Omit<VoucherAccepted, "signature" | "signedMaxClaimable">, ChannelPayloadRejected> => {
  const { kind, maxClaimable, state } = input
  const amount = kind === "refund" ? 0n : input.price
  const expected = state.chargedCumulative + amount
  if (maxClaimable !== expected) return Either.right(correctiveAnswer(input.channelId, state, expected))
  const available = state.balance + (input.depositAmount ?? 0n)
  if (available === 0n) {
    return Either.left(rejected("invalid_batch_settlement_evm_channel_not_found", "the channel has no balance (deposit first)", { channelId: input.channelId }))
  }
  if (maxClaimable > available) {
    return Either.left(rejected("invalid_batch_settlement_evm_cumulative_exceeds_balance", "the voucher's ceiling is above the channel's balance (top it up)", {
      maxClaimableAmount: maxClaimable.toString(),
      balance: available.toString()
    }))
  }
  if (kind === "refund" ? maxClaimable < state.totalClaimed : maxClaimable <= state.totalClaimed) {
    return Either.left(rejected("invalid_batch_settlement_evm_cumulative_below_claimed", "the voucher's ceiling is not above what was already claimed", {
      maxClaimableAmount: maxClaimable.toString(),
      totalClaimed: state.totalClaimed.toString()
    }))
  }
  return Either.right({ _tag: "Accepted", newCumulative: maxClaimable, amount })
}

/** How a signature that is not a plain key's is checked (ERC-1271 through the chain). */
export interface ChainCheck {
  readonly reader: HashSignatureReader
  readonly timeoutMs: number
}

/**
 * The voucher's signature: by `payerAuthorizer` (a key, recovered locally) when it is set, else by the payer (a key, or
 * ERC-1271 through the chain).
 */
export const verifyVoucherSignature = (config: ChannelConfig, voucher: VoucherFields, chainId: number, chain: ChainCheck) => {
  const maxClaimable = BigInt(voucher.maxClaimableAmount)
  const check = {
    typedData: voucherTypedData(chainId, voucher.channelId, maxClaimable),
    digest: voucherDigest(chainId, voucher.channelId, maxClaimable),
    signature: voucher.signature,
    reason: "invalid_batch_settlement_evm_voucher_signature",
    what: "voucher"
  } as const
  return isAddressEqual(config.payerAuthorizer, zeroAddress)
    ? verifyAccountSignature(chain.reader, chain.timeoutMs, config.payer, check)
    : verifyKeySignature(config.payerAuthorizer, check)
}

/**
 * A voucher (or a deposit's or refund's voucher) in order: the channel config is ours, the signature is the payer's,
 * then the cumulative rules against `state`. The signature comes before the corrective answer, so our channel state
 * is shown only to whoever holds the payer's key.
 */
export const verifyVoucher = (input: {
  readonly kind: VoucherKind
  readonly config: ChannelConfig
  readonly voucher: VoucherFields
  readonly price: bigint
  readonly state: ChannelState
  readonly ours: OurChannelTerms
  readonly chain: ChainCheck
  readonly depositAmount?: bigint
}): Effect.Effect<VoucherAccepted | CorrectiveAnswer, ChannelPayloadRejected> =>
  Effect.gen(function* () {
    yield* checkChannelConfig(input.config, input.voucher.channelId, input.ours)
    yield* verifyVoucherSignature(input.config, input.voucher, input.ours.chainId, input.chain)
    const outcome = yield* checkCumulative({
      kind: input.kind,
      channelId: input.voucher.channelId,
      maxClaimable: BigInt(input.voucher.maxClaimableAmount),
      price: input.price,
      state: input.state,
      ...(input.depositAmount === undefined ? {} : { depositAmount: input.depositAmount })
    })
    if (outcome._tag === "Corrective") return outcome
    return { ...outcome, signedMaxClaimable: BigInt(input.voucher.maxClaimableAmount), signature: input.voucher.signature }
  }).pipe(Effect.withSpan("BatchSettlement.verifyVoucher"))
