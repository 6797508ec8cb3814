// Channel payloads signed by @x402/evm's batch-settlement client code with throwaway keys, and our terms for them, for
// the unit tests of layers/x402/batchSettlement (no chain: the signatures are the official client's).
import type { PaymentRequirements } from "@x402/core/types"
import { createBatchSettlementEIP3009DepositPayload, signVoucher } from "@x402/evm/batch-settlement/client"
import { Schema } from "effect"
import { keccak256, toHex } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import type { OurChannelTerms } from "../../layers/x402/batchSettlement/channelConfig.js"
import { type ChannelConfig, DepositPayload, VoucherPayload } from "../../layers/x402/batchSettlement/payloads.js"
import { channelIdOf } from "../../layers/x402/batchSettlement/typedData.js"
import type { ChannelState } from "../../layers/x402/batchSettlement/voucher.js"

export const NETWORK = "eip155:84532"
export const CHAIN_ID = 84532

export const payer = privateKeyToAccount(generatePrivateKey())
export const stranger = privateKeyToAccount(generatePrivateKey())
const treasury = privateKeyToAccount(generatePrivateKey()).address
const authorizer = privateKeyToAccount(generatePrivateKey()).address
const usdc = privateKeyToAccount(generatePrivateKey()).address

export const ours: OurChannelTerms = { chainId: CHAIN_ID, receiver: treasury, receiverAuthorizer: authorizer, token: usdc, withdrawDelay: 900 }

export const requirements: PaymentRequirements = {
  scheme: "batch-settlement",
  network: NETWORK,
  amount: "100",
  asset: usdc,
  payTo: treasury,
  maxTimeoutSeconds: 3600,
  extra: { receiverAuthorizer: authorizer, withdrawDelay: 900, name: "USDC", version: "2" }
}

export const configFor = (salt: string, overrides: Partial<ChannelConfig> = {}): ChannelConfig => ({
  payer: payer.address,
  payerAuthorizer: payer.address,
  receiver: treasury,
  receiverAuthorizer: authorizer,
  token: usdc,
  withdrawDelay: 900,
  salt: keccak256(toHex(salt)),
  ...overrides
})

/** A voucher payload for `maxClaimable`, signed by the official client's `signVoucher` (by `signer`, the payer by default). */
export const voucherPayload = async (config: ChannelConfig, maxClaimable: bigint, signer = payer) =>
  Schema.decodeUnknownSync(VoucherPayload)({
    type: "voucher",
    channelConfig: config,
    voucher: await signVoucher(signer, channelIdOf(config, CHAIN_ID), maxClaimable.toString(), NETWORK)
  })

/** The official client's ERC-3009 deposit payload (authorization to the deposit collector + first voucher). */
export const depositPayload = async (config: ChannelConfig, amount: bigint, maxClaimable: bigint) =>
  Schema.decodeUnknownSync(DepositPayload)(
    (await createBatchSettlementEIP3009DepositPayload(payer, 2, requirements, config, amount.toString(), maxClaimable.toString())).payload
  )

export const stateOf = (overrides: Partial<ChannelState> = {}): ChannelState => ({
  balance: 1_000n,
  totalClaimed: 0n,
  chargedCumulative: 0n,
  withdrawRequestedAt: 0,
  refundNonce: 0n,
  ...overrides
})
