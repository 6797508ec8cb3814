// A smart-account payer (the fixture ERC-1271 account, deployed) on the devnet: with no payer authorizer, its vouchers
// and its deposit authorization are signed by the account (its owner's key over the digest, which the account's
// isValidSignature accepts), so our checks find no key signature and ask the chain.
import { beforeAll, describe, expect, it } from "@effect/vitest"
import type { PaymentRequirements } from "@x402/core/types"
import { createBatchSettlementEIP3009DepositPayload, signVoucher } from "@x402/evm/batch-settlement/client"
import { Effect, Schema } from "effect"
import { inject } from "vitest"
import { keccak256, toHex, zeroAddress } from "viem"
import type { OurChannelTerms } from "../../layers/x402/batchSettlement/channelConfig.js"
import { verifyDeposit } from "../../layers/x402/batchSettlement/deposit.js"
import { type ChannelConfig, DepositPayload } from "../../layers/x402/batchSettlement/payloads.js"
import { channelIdOf } from "../../layers/x402/batchSettlement/typedData.js"
import { type ChainCheck, verifyVoucher } from "../../layers/x402/batchSettlement/voucher.js"
import { devAccount, publicClient, TREASURY } from "../support/clients.js"
import { clientSigner, deployFactory, type SmartAccount, smartAccount, strangerOwned } from "../support/smartAccounts.js"

const NETWORK = "eip155:84532"
let account: SmartAccount
let ours: OurChannelTerms
let chain: ChainCheck
let requirements: PaymentRequirements
beforeAll(async () => {
  account = await smartAccount(await deployFactory(), { deployed: true, usdc: 1_000_000n })
  const usdc = inject("usdcAddress")
  ours = { chainId: 84532, receiver: TREASURY, receiverAuthorizer: devAccount(2).address, token: usdc, withdrawDelay: 900 }
  chain = { reader: publicClient(), timeoutMs: 5_000 }
  requirements = {
    scheme: "batch-settlement", network: NETWORK, amount: "100", asset: usdc, payTo: TREASURY, maxTimeoutSeconds: 3600,
    extra: { receiverAuthorizer: ours.receiverAuthorizer, withdrawDelay: 900, name: "USDC", version: "2" }
  }
}, 60_000)

const configOf = (salt: string): ChannelConfig => ({
  payer: account.address, payerAuthorizer: zeroAddress, receiver: ours.receiver, receiverAuthorizer: ours.receiverAuthorizer,
  token: ours.token, withdrawDelay: 900, salt: keccak256(toHex(salt))
})

describe("a smart-account payer's channel payloads", () => {
  it.effect("its voucher is accepted through ERC-1271; one its owner did not sign is refused", () =>
    Effect.gen(function* () {
      const config = configOf("smart voucher")
      const channelId = channelIdOf(config, ours.chainId)
      const state = { balance: 1_000n, totalClaimed: 0n, chargedCumulative: 100n, withdrawRequestedAt: 0, refundNonce: 0n }
      const signed = yield* Effect.promise(() => signVoucher(clientSigner(account), channelId, "200", NETWORK))
      expect(yield* verifyVoucher({ kind: "voucher", config, voucher: signed, price: 100n, state, ours, chain })).toMatchObject({ _tag: "Accepted", newCumulative: 200n })
      const forged = yield* Effect.promise(() => signVoucher(clientSigner(strangerOwned(account)), channelId, "200", NETWORK))
      const error = yield* Effect.flip(verifyVoucher({ kind: "voucher", config, voucher: forged, price: 100n, state, ours, chain }))
      expect(error.reason).toBe("invalid_batch_settlement_evm_voucher_signature")
    }))

  it.effect("its deposit authorization is accepted through ERC-1271", () =>
    Effect.gen(function* () {
      const config = configOf("smart deposit")
      const created = yield* Effect.promise(() => createBatchSettlementEIP3009DepositPayload(clientSigner(account), 2, requirements, config, "1000", "100"))
      const payload = Schema.decodeUnknownSync(DepositPayload)(created.payload)
      const state = { balance: 0n, totalClaimed: 0n, chargedCumulative: 0n, withdrawRequestedAt: 0, refundNonce: 0n }
      const verified = yield* verifyDeposit({
        payload, price: 100n, state, ours, tokenDomain: { name: "USDC", version: "2" }, chain, now: Math.floor(Date.now() / 1000), minValiditySeconds: 60
      })
      expect(verified.deposit).toMatchObject({ payer: account.address, amount: 1_000n })
      expect(verified.voucher).toMatchObject({ _tag: "Accepted", newCumulative: 100n })
    }))
})
