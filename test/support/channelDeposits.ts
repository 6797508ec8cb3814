// A payer's deposit into one of our channels on the run's devnet, signed by @x402/evm's batch-settlement client: the
// verified deposit the paid-call pipeline hands to services/channels/Deposits.ts (its signature checks are
// layers/x402/batchSettlement's own tests), and the channel's state read from the contract.
import type { PaymentRequirements } from "@x402/core/types"
import { createBatchSettlementEIP3009DepositPayload } from "@x402/evm/batch-settlement/client"
import { Effect, Option, Schema } from "effect"
import { type Hex, keccak256, toHex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { batchSettlementAbi, batchSettlementAddress } from "../../layers/x402/batchSettlement/contract.js"
import type { DepositInput } from "../../services/channels/Deposits.js"
import { type ChannelConfig, DepositPayload } from "../../layers/x402/batchSettlement/payloads.js"
import { channelIdOf, depositNonceOf } from "../../layers/x402/batchSettlement/typedData.js"
import { ChannelTerms, type NetworkChannelTerms } from "../../services/channels/Terms.js"
import { TestEnv } from "./harness.js"

/** Our channel terms on the run's devnet (its contracts are placed at the official addresses). */
export const devnetTerms = Effect.gen(function* () {
  const { chain } = yield* TestEnv
  const terms = yield* Effect.provide(ChannelTerms, ChannelTerms.Default)
  return Option.getOrThrow(terms.on(chain.network))
})

export const channelConfig = (terms: NetworkChannelTerms, payer: PrivateKeyAccount, salt: string): ChannelConfig => ({
  payer: payer.address,
  payerAuthorizer: payer.address,
  receiver: terms.receiver,
  receiverAuthorizer: terms.receiverAuthorizer,
  token: terms.token,
  withdrawDelay: terms.withdrawDelay,
  salt: keccak256(toHex(salt))
})

/** The official client's ERC-3009 deposit of `amount` into `config`'s channel, as the pipeline passes it on once verified. */
export const signedDeposit = (terms: NetworkChannelTerms, payer: PrivateKeyAccount, config: ChannelConfig, amount: bigint) =>
  Effect.promise(async (): Promise<DepositInput> => {
    const requirements: PaymentRequirements = {
      scheme: "batch-settlement",
      network: `eip155:${terms.chainId}` as const,
      amount: "100",
      asset: terms.token,
      payTo: terms.receiver,
      maxTimeoutSeconds: 3600,
      extra: { receiverAuthorizer: terms.receiverAuthorizer, withdrawDelay: terms.withdrawDelay, name: terms.chain.usdc.name, version: terms.chain.usdc.version }
    }
    const created = await createBatchSettlementEIP3009DepositPayload(payer, 2, requirements, config, amount.toString(), "100")
    const payload = Schema.decodeUnknownSync(DepositPayload)(created.payload)
    if (!("erc3009Authorization" in payload.deposit.authorization)) throw new Error("no ERC-3009 authorization")
    const auth = payload.deposit.authorization.erc3009Authorization
    const channelId = channelIdOf(config, terms.chainId)
    return {
      terms,
      config,
      channelId,
      authorization: {
        payer: config.payer,
        amount,
        validAfter: BigInt(auth.validAfter),
        validBefore: BigInt(auth.validBefore),
        salt: auth.salt,
        nonce: depositNonceOf(channelId, auth.salt),
        signature: auth.signature
      }
    }
  })

/** The contract's balance and totalClaimed of a channel. */
export const onChain = (terms: NetworkChannelTerms, channelId: Hex) =>
  Effect.map(
    Effect.promise(() => terms.chain.publicClient.readContract({ address: batchSettlementAddress, abi: batchSettlementAbi, functionName: "channels", args: [channelId] })),
    ([balance, totalClaimed]) => ({ balance, totalClaimed })
  )
