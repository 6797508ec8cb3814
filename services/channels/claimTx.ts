// The transactions our side of a batch-settlement channel sends to x402BatchSettlement, built and signed off chain:
// one `claimWithSignature` carrying many channels' vouchers (the receiver authorizer signs the EIP-712 ClaimBatch of
// their (channelId, maxClaimableAmount, totalClaimed) entries), `settle(receiver, token)`, and a cooperative refund
// (`refundWithSignature` on the authorizer's Refund(channelId, nonce, amount) signature), after a claim of what is
// charged in the same `multicall` so that the refund can never take charged money.
import { claimBatchTypes, refundTypes } from "@x402/evm"
import { type Account, encodeFunctionData, getAddress, type Hex } from "viem"
import { batchSettlementAbi } from "../../layers/x402/batchSettlement/contract.js"
import { batchSettlementDomain } from "../../layers/x402/batchSettlement/typedData.js"

/** One ABI fragment of x402BatchSettlement for every call our side makes (deposits, claims, settles, refunds). */
export { batchSettlementAbi } from "../../layers/x402/batchSettlement/contract.js"

/** The most channels one claim transaction carries (about 5.4M gas at 26k per channel: a fraction of a block). */
export const CLAIM_BATCH_MAX = 200
/**
 * Gas of a claim transaction of `n` channels: measured 3.41M for 130 first claims on anvil (≈ 26k per channel, a
 * zero totalClaimed slot written), with half as much again of room.
 */
export const claimGas = (n: number): bigint => 120_000n + 40_000n * BigInt(n)
export const SETTLE_GAS = 120_000n
export const REFUND_GAS = 260_000n

/** A channel's config as the contract takes it (the row's lowercase hex, checksummed). */
export interface ChannelConfigFields {
  readonly payer: string
  readonly payerAuthorizer: string
  readonly receiver: string
  readonly receiverAuthorizer: string
  readonly token: string
  readonly withdrawDelay: number
  readonly salt: string
}

/** One channel's line of a claim: its config, the payer's voucher (ceiling and signature), and the new totalClaimed. */
export interface ClaimLine {
  readonly channelId: Hex
  readonly config: ChannelConfigFields
  readonly maxClaimable: bigint
  readonly voucherSignature: Hex
  readonly totalClaimed: bigint
}

const hex = (s: string): Hex => (s.startsWith("0x") ? (s as Hex) : `0x${s}`)

export const contractConfig = (c: ChannelConfigFields) => ({
  payer: getAddress(c.payer),
  payerAuthorizer: getAddress(c.payerAuthorizer),
  receiver: getAddress(c.receiver),
  receiverAuthorizer: getAddress(c.receiverAuthorizer),
  token: getAddress(c.token),
  withdrawDelay: c.withdrawDelay,
  salt: hex(c.salt)
})

/** The receiver authorizer's ClaimBatch signature over the lines, in their order. */
export const signClaimBatch = (authorizer: Account, chainId: number, lines: ReadonlyArray<ClaimLine>): Promise<Hex> => {
  if (authorizer.signTypedData === undefined) return Promise.reject(new Error("the channel authorizer cannot sign typed data"))
  return authorizer.signTypedData({
    domain: batchSettlementDomain(chainId),
    types: claimBatchTypes,
    primaryType: "ClaimBatch",
    message: { claims: lines.map((l) => ({ channelId: l.channelId, maxClaimableAmount: l.maxClaimable, totalClaimed: l.totalClaimed })) }
  })
}

/** The receiver authorizer's Refund signature for the channel's current refund nonce. */
export const signRefund = (authorizer: Account, chainId: number, channelId: Hex, nonce: bigint, amount: bigint): Promise<Hex> => {
  if (authorizer.signTypedData === undefined) return Promise.reject(new Error("the channel authorizer cannot sign typed data"))
  return authorizer.signTypedData({ domain: batchSettlementDomain(chainId), types: refundTypes, primaryType: "Refund", message: { channelId, nonce, amount } })
}

/** The arguments of `claimWithSignature(VoucherClaim[], authorizerSignature)`. */
export const claimArgs = (lines: ReadonlyArray<ClaimLine>, authorizerSignature: Hex) =>
  [
    lines.map((l) => ({
      voucher: { channel: contractConfig(l.config), maxClaimableAmount: l.maxClaimable },
      signature: l.voucherSignature,
      totalClaimed: l.totalClaimed
    })),
    authorizerSignature
  ] as const

/** `claimWithSignature(VoucherClaim[], authorizerSignature)` calldata. */
export const claimCalldata = (lines: ReadonlyArray<ClaimLine>, authorizerSignature: Hex): Hex =>
  encodeFunctionData({ abi: batchSettlementAbi, functionName: "claimWithSignature", args: claimArgs(lines, authorizerSignature) })

/** `settle(receiver, token)` calldata: everything claimed for the receiver in the token moves to it. */
export const settleCalldata = (receiver: string, token: string): Hex =>
  encodeFunctionData({ abi: batchSettlementAbi, functionName: "settle", args: [getAddress(receiver), getAddress(token)] })

/** Refunds ask for at most this: the contract pays what is unclaimed when asked for more. */
export const UINT128_MAX = (1n << 128n) - 1n

/** The refund (preceded by the claim of what is charged when there is one), as one transaction's calldata. */
export const refundCalldata = (input: {
  readonly config: ChannelConfigFields
  readonly amount: bigint
  readonly nonce: bigint
  readonly refundSignature: Hex
  readonly claim: { readonly line: ClaimLine; readonly signature: Hex } | undefined
}): Hex => {
  const refund = encodeFunctionData({
    abi: batchSettlementAbi,
    functionName: "refundWithSignature",
    args: [contractConfig(input.config), input.amount, input.nonce, input.refundSignature]
  })
  if (input.claim === undefined) return refund
  return encodeFunctionData({ abi: batchSettlementAbi, functionName: "multicall", args: [[claimCalldata([input.claim.line], input.claim.signature), refund]] })
}
