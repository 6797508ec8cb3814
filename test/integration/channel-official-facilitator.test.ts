// The official x402 facilitators (unmodified `@x402/evm`) against our contracts on the devnet: batch-settlement
// verifies and settles a deposit the official client signed (reading channel state through our Multicall3), then
// submits a signed claim and a settle; upto verifies the official client's authorization and settles less than its
// maximum through our Permit2 and proxy.
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import { PERMIT2_ADDRESS, toFacilitatorEvmSigner } from "@x402/evm"
import { BatchSettlementEvmScheme } from "@x402/evm/batch-settlement/facilitator"
import { UptoEvmScheme as UptoClient } from "@x402/evm/upto/client"
import { UptoEvmScheme as UptoFacilitator } from "@x402/evm/upto/facilitator"
import { createWalletClient, http, maxUint256, publicActions } from "viem"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { type ChannelChain, NETWORK, startChannelChain } from "../support/channelChain.js"

let c: ChannelChain
let facilitator: BatchSettlementEvmScheme
let requirements: PaymentRequirements
let upto: UptoFacilitator
beforeAll(async () => {
  c = await startChannelChain()
  const client = createWalletClient({ account: c.relayer, chain: devnetChain(c.devnet.rpcUrl), transport: http(c.devnet.rpcUrl), pollingInterval: 20 }).extend(publicActions)
  // The same adapter as test/support/facilitator.ts: the package's signer type is looser than viem's generics.
  const signer = toFacilitatorEvmSigner({
    address: c.relayer.address,
    readContract: (args) => client.readContract(args as Parameters<typeof client.readContract>[0]),
    verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
    writeContract: (args) => client.writeContract(args as Parameters<typeof client.writeContract>[0]),
    sendTransaction: (args) => client.sendTransaction(args),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args)
  })
  facilitator = new BatchSettlementEvmScheme(signer)
  upto = new UptoFacilitator(signer)
  requirements = { ...c.requirements, network: NETWORK, extra: { ...c.requirements.extra } }
}, 60_000)
afterAll(() => c?.devnet.stop())

const paid = (payload: Record<string, unknown>): PaymentPayload => ({ x402Version: 2, accepted: requirements, payload })

describe("the official batch-settlement facilitator on our contracts", () => {
  it("verifies and settles a deposit, then a claim and a settle to the receiver", async () => {
    const config = c.configFor("official facilitator")
    const { payload } = await c.depositPayload(config, 1_000n)
    const verified = await facilitator.verify(paid(payload), requirements)
    expect(verified).toMatchObject({ isValid: true, payer: c.payer.address, extra: { balance: "0", totalClaimed: "0", refundNonce: "0" } })

    const deposited = await facilitator.settle(paid(payload), requirements)
    expect(deposited).toMatchObject({ success: true, amount: "1000", extra: { channelState: { balance: "1000", totalClaimed: "0" } } })

    const row = await c.claimRow(config, 300n, 250n)
    const claims = [{ voucher: { channel: config, maxClaimableAmount: "300" }, signature: row.signature, totalClaimed: "250" }]
    const claimed = await facilitator.settle(paid({ type: "claim", claims, claimAuthorizerSignature: await c.signClaims([row]) }), requirements)
    expect(claimed).toMatchObject({ success: true })
    expect(await c.channelState(payload.voucher.channelId)).toEqual({ balance: 1_000n, totalClaimed: 250n })

    const receiverBefore = await c.usdcBalance(c.receiver.address)
    const settled = await facilitator.settle(paid({ type: "settle", receiver: c.receiver.address, token: c.usdc }), requirements)
    expect(settled).toMatchObject({ success: true, amount: "250" })
    expect(await c.usdcBalance(c.receiver.address)).toBe(receiverBefore + 250n)
  })
})

describe("the official upto facilitator on our Permit2 and proxy", () => {
  it("verifies the official client's authorization for a maximum and settles what was used", async () => {
    await c.mined(await c.walletOf(c.payer).writeContract({ address: c.usdc, abi: usdcAbi, functionName: "approve", args: [PERMIT2_ADDRESS, maxUint256] }))
    const max: PaymentRequirements = {
      scheme: "upto", network: NETWORK, amount: "5000", asset: c.usdc, payTo: c.receiver.address, maxTimeoutSeconds: 300,
      extra: { name: "USDC", version: "2", facilitatorAddress: c.relayer.address }
    }
    const created = await new UptoClient(c.payer).createPaymentPayload(2, max)
    const payload: PaymentPayload = { x402Version: 2, accepted: max, payload: created.payload }
    expect(await upto.verify(payload, max)).toMatchObject({ isValid: true, payer: c.payer.address })
    const receiverBefore = await c.usdcBalance(c.receiver.address)
    const settled = await upto.settle(payload, { ...max, amount: "1858" })
    expect(settled).toMatchObject({ success: true, amount: "1858" })
    expect(await c.usdcBalance(c.receiver.address)).toBe(receiverBefore + 1_858n)
  })
})
