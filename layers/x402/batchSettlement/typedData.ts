// The EIP-712 data of the batch-settlement scheme: the channel id (the hash of the channel config), the voucher, and the
// ERC-3009 deposit authorization the ERC-3009 deposit collector redeems. The domain, the voucher type and the channel id
// computation are @x402/evm's own; the collector's nonce and the ReceiveWithAuthorization type (which the package keeps
// internal) are written out here and cross-checked against the contracts on the devnet.
import { BATCH_SETTLEMENT_ADDRESS, BATCH_SETTLEMENT_DOMAIN, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, voucherTypes } from "@x402/evm"
import { computeChannelId } from "@x402/evm/batch-settlement/client"
import { encodeAbiParameters, getAddress, type Hex, hashTypedData, keccak256 } from "viem"
import type { ChannelConfig } from "./payloads.js"

/** The x402 Batch Settlement EIP-712 domain on `chainId` (the contract's canonical address). */
export const batchSettlementDomain = (chainId: number) =>
  ({ ...BATCH_SETTLEMENT_DOMAIN, chainId, verifyingContract: getAddress(BATCH_SETTLEMENT_ADDRESS) }) as const

/** The channel id: the config's EIP-712 hash, as x402BatchSettlement's `getChannelId` computes it. */
export const channelIdOf = (config: ChannelConfig, chainId: number): Hex => computeChannelId(config, chainId)

/** The voucher as typed data (what the payer authorizer signs). */
export const voucherTypedData = (chainId: number, channelId: Hex, maxClaimableAmount: bigint) =>
  ({
    domain: batchSettlementDomain(chainId),
    types: voucherTypes,
    primaryType: "Voucher",
    message: { channelId, maxClaimableAmount }
  }) as const

/** The voucher's digest, as the contract's `getVoucherDigest(channelId, maxClaimableAmount)`. */
export const voucherDigest = (chainId: number, channelId: Hex, maxClaimableAmount: bigint): Hex =>
  hashTypedData(voucherTypedData(chainId, channelId, maxClaimableAmount))

/**
 * The ERC-3009 nonce the deposit collector redeems: `keccak256(abi.encode(channelId, salt))`. It binds the token
 * authorization to one channel, so an authorization signed for one channel cannot fund another.
 */
export const depositNonceOf = (channelId: Hex, salt: Hex): Hex =>
  keccak256(encodeAbiParameters([{ type: "bytes32" }, { type: "uint256" }], [channelId, BigInt(salt)]))

export const receiveWithAuthorizationTypes = {
  ReceiveWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" }
  ]
} as const

/** The token's EIP-712 domain (name and version from the offer's `extra`, as the payer's client signs it). */
export interface TokenDomain {
  readonly name: string
  readonly version: string
}

/** The deposit's `receiveWithAuthorization` from the payer to the ERC-3009 deposit collector, as typed data. */
export const depositAuthorizationTypedData = (input: {
  readonly chainId: number
  readonly token: `0x${string}`
  readonly tokenDomain: TokenDomain
  readonly payer: `0x${string}`
  readonly amount: bigint
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly nonce: Hex
}) =>
  ({
    domain: { name: input.tokenDomain.name, version: input.tokenDomain.version, chainId: input.chainId, verifyingContract: getAddress(input.token) },
    types: receiveWithAuthorizationTypes,
    primaryType: "ReceiveWithAuthorization",
    message: {
      from: getAddress(input.payer),
      to: getAddress(ERC3009_DEPOSIT_COLLECTOR_ADDRESS),
      value: input.amount,
      validAfter: input.validAfter,
      validBefore: input.validBefore,
      nonce: input.nonce
    }
  }) as const
