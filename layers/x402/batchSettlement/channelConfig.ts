// Whether a payer's channel config is one of ours: the channel id it claims, our receiver, our receiver authorizer, our
// token and our withdrawal delay. Pure; the same rules, in the same order, as @x402/evm's facilitator
// (`validateChannelConfig`) and the scheme's verification rules 1-5.
import { Either } from "effect"
import { type Hex, isAddressEqual, zeroAddress } from "viem"
import type { ChannelConfig } from "./payloads.js"
import { type ChannelPayloadRejected, rejected } from "./reasons.js"
import { channelIdOf } from "./typedData.js"

/** The scheme's bounds on a channel's withdrawal delay (the contract refuses any other): 15 minutes to 30 days. */
export const MIN_WITHDRAW_DELAY_SECONDS = 900
export const MAX_WITHDRAW_DELAY_SECONDS = 30 * 24 * 3600

/** The channel terms we offer (the 402's payTo, asset, extra.receiverAuthorizer and extra.withdrawDelay) on one chain. */
export interface OurChannelTerms {
  readonly chainId: number
  /** Where claimed funds are settled: our treasury. */
  readonly receiver: `0x${string}`
  /** The address of the key that signs our claims and refunds. */
  readonly receiverAuthorizer: `0x${string}`
  /** Our USDC. */
  readonly token: `0x${string}`
  /** The delay we advertise, in seconds; a channel must carry exactly this one. */
  readonly withdrawDelay: number
}

/**
 * The config, when it hashes to `channelId` and names our receiver, authorizer, token and delay. The delay must equal
 * the one we advertise (the scheme's rule 5), not merely reach it: an honest client copies it from the offer, and one
 * delay per offer keeps a payer's channel id predictable from the offer alone. It must also lie within the scheme's
 * bounds, which our own setting is held to at start.
 */
export const checkChannelConfig = (config: ChannelConfig, channelId: Hex, ours: OurChannelTerms): Either.Either<ChannelConfig, ChannelPayloadRejected> => {
  const computed = channelIdOf(config, ours.chainId)
  if (computed.toLowerCase() !== channelId.toLowerCase()) {
    return Either.left(rejected("invalid_batch_settlement_evm_channel_id_mismatch", "the channel config does not hash to the voucher's channel id", { channelId, computed }))
  }
  if (!isAddressEqual(config.receiver, ours.receiver)) {
    return Either.left(rejected("invalid_batch_settlement_evm_receiver_mismatch", "the channel pays another receiver than ours", { receiver: config.receiver, expected: ours.receiver }))
  }
  if (isAddressEqual(config.receiverAuthorizer, zeroAddress) || !isAddressEqual(config.receiverAuthorizer, ours.receiverAuthorizer)) {
    return Either.left(rejected("invalid_batch_settlement_evm_receiver_authorizer_mismatch", "the channel names another receiver authorizer than ours", {
      receiverAuthorizer: config.receiverAuthorizer,
      expected: ours.receiverAuthorizer
    }))
  }
  if (!isAddressEqual(config.token, ours.token)) {
    return Either.left(rejected("invalid_batch_settlement_evm_token_mismatch", "the channel holds another token than the one we are paid in", { token: config.token, expected: ours.token }))
  }
  if (config.withdrawDelay !== ours.withdrawDelay) {
    return Either.left(rejected("invalid_batch_settlement_evm_withdraw_delay_mismatch", "the channel's withdrawal delay is not the one we offer", {
      withdrawDelay: config.withdrawDelay,
      expected: ours.withdrawDelay
    }))
  }
  if (!withdrawDelayInBounds(config.withdrawDelay)) {
    return Either.left(rejected("invalid_batch_settlement_evm_withdraw_delay_out_of_range", `the withdrawal delay must be between ${MIN_WITHDRAW_DELAY_SECONDS} and ${MAX_WITHDRAW_DELAY_SECONDS} seconds`, {
      withdrawDelay: config.withdrawDelay
    }))
  }
  return Either.right(config)
}

export const withdrawDelayInBounds = (seconds: number) =>
  Number.isInteger(seconds) && seconds >= MIN_WITHDRAW_DELAY_SECONDS && seconds <= MAX_WITHDRAW_DELAY_SECONDS
