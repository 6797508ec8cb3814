// A deposit payload checked off chain: the channel is ours, the token authorization is the payer's ERC-3009
// `receiveWithAuthorization` of the deposit to the ERC-3009 deposit collector, bound to this channel by its nonce and
// valid now, and the voucher that comes with it passes the voucher rules with the deposit counted in the balance.
// Nothing here reads the payer's token balance or simulates the deposit: the settling side does before it sends it.
import { Effect } from "effect"
import { type Hex, hashTypedData } from "viem"
import { checkChannelConfig, type OurChannelTerms } from "./channelConfig.js"
import type { DepositPayload } from "./payloads.js"
import { type ChannelPayloadRejected, rejected } from "./reasons.js"
import { verifyAccountSignature } from "./signature.js"
import { depositAuthorizationTypedData, depositNonceOf, type TokenDomain } from "./typedData.js"
import { type ChainCheck, type ChannelState, type CorrectiveAnswer, verifyVoucher, type VoucherAccepted } from "./voucher.js"

/** The ERC-3009 authorization of a verified deposit: what the collector redeems. */
export interface VerifiedDepositAuthorization {
  readonly payer: `0x${string}`
  readonly amount: bigint
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly salt: Hex
  /** `keccak256(abi.encode(channelId, salt))`: the ERC-3009 nonce the token records as used. */
  readonly nonce: Hex
  readonly signature: Hex
}

export interface DepositVerified {
  readonly deposit: VerifiedDepositAuthorization
  readonly voucher: VoucherAccepted | CorrectiveAnswer
}

export const verifyDeposit = (input: {
  readonly payload: DepositPayload
  readonly price: bigint
  /** Our state of the channel; for one we do not know, the chain's with `chargedCumulative = totalClaimed`. */
  readonly state: ChannelState
  readonly ours: OurChannelTerms
  /** The token's EIP-712 name and version (the offer's `extra.name`/`extra.version`). */
  readonly tokenDomain: TokenDomain
  readonly chain: ChainCheck
  /** Unix seconds. */
  readonly now: number
  /** How long the authorization must stay valid after now, for the deposit to be sent and mined. */
  readonly minValiditySeconds: number
}): Effect.Effect<DepositVerified, ChannelPayloadRejected> =>
  Effect.gen(function* () {
    const { channelConfig: config, voucher, deposit } = input.payload
    yield* checkChannelConfig(config, voucher.channelId, input.ours)
    if (!("erc3009Authorization" in deposit.authorization)) {
      return yield* rejected("invalid_batch_settlement_evm_erc3009_authorization_required", "deposits are taken as ERC-3009 authorizations (assetTransferMethod eip3009)")
    }
    const auth = deposit.authorization.erc3009Authorization
    const amount = BigInt(deposit.amount)
    if (amount === 0n) return yield* rejected("invalid_batch_settlement_evm_deposit_payload", "the deposit amount is zero")
    const validAfter = BigInt(auth.validAfter)
    const validBefore = BigInt(auth.validBefore)
    if (validBefore < BigInt(input.now + input.minValiditySeconds)) {
      return yield* rejected("invalid_batch_settlement_evm_payload_authorization_valid_before", `the deposit authorization must stay valid at least ${input.minValiditySeconds} more seconds`, {
        validBefore: auth.validBefore,
        now: input.now
      })
    }
    if (validAfter > BigInt(input.now)) {
      return yield* rejected("invalid_batch_settlement_evm_payload_authorization_valid_after", "the deposit authorization is not valid yet", { validAfter: auth.validAfter, now: input.now })
    }
    const nonce = depositNonceOf(voucher.channelId, auth.salt)
    const typedData = depositAuthorizationTypedData({
      chainId: input.ours.chainId,
      token: config.token,
      tokenDomain: input.tokenDomain,
      payer: config.payer,
      amount,
      validAfter,
      validBefore,
      nonce
    })
    yield* verifyAccountSignature(input.chain.reader, input.chain.timeoutMs, config.payer, {
      typedData,
      digest: hashTypedData(typedData),
      signature: auth.signature,
      reason: "invalid_batch_settlement_evm_receive_authorization_signature",
      what: "deposit authorization"
    })
    const outcome = yield* verifyVoucher({
      kind: "deposit",
      config,
      voucher,
      price: input.price,
      state: input.state,
      ours: input.ours,
      chain: input.chain,
      depositAmount: amount
    })
    return {
      deposit: { payer: config.payer, amount, validAfter, validBefore, salt: auth.salt, nonce, signature: auth.signature },
      voucher: outcome
    }
  }).pipe(Effect.withSpan("BatchSettlement.verifyDeposit"))
