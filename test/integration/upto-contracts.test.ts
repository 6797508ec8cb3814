// Our Permit2 and x402UptoPermit2Proxy, placed by the devnet's start at the addresses the official clients use: the
// official upto client signs a maximum, the named facilitator settles what was used (at most that maximum, once);
// and the batch-settlement Permit2 deposit collector takes a deposit on a Permit2 witness signature. A devnet of its own.
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import {
  BATCH_SETTLEMENT_ADDRESS,
  isUptoPermit2Payload,
  PERMIT2_ADDRESS,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress
} from "@x402/evm"
import { computeChannelId } from "@x402/evm/batch-settlement/client"
import { UptoEvmScheme } from "@x402/evm/upto/client"
import { encodeAbiParameters, maxUint256, parseEventLogs, type PrivateKeyAccount } from "viem"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { bigints, type ChannelChain, NETWORK, oursAbi, startChannelChain } from "../support/channelChain.js"
import { officialBatchSettlementAbi, officialPermit2DepositCollectorAddress } from "../support/x402Official.js"

let c: ChannelChain
beforeAll(async () => {
  c = await startChannelChain()
  // The payer's one-time approval of Permit2 (the spec's "direct user approval").
  await c.mined(await c.walletOf(c.payer).writeContract({ address: c.usdc, abi: usdcAbi, functionName: "approve", args: [PERMIT2_ADDRESS, maxUint256] }))
}, 60_000)
afterAll(() => c?.devnet.stop())

/** The proxy's errors and Permit2's (a refused signature or nonce reverts inside Permit2). */
const proxyAndPermit2 = () => [...oursAbi("x402UptoPermit2Proxy"), ...oursAbi("Permit2").filter((item) => item.type === "error")]

/** The official upto client's payload for a maximum of `max`, bound to the relayer as facilitator. */
const authorize = async (max: bigint) => {
  const result = await new UptoEvmScheme(c.payer).createPaymentPayload(2, {
    scheme: "upto",
    network: NETWORK,
    amount: max.toString(),
    asset: c.usdc,
    payTo: c.receiver.address,
    maxTimeoutSeconds: 300,
    extra: { name: "USDC", version: "2", facilitatorAddress: c.relayer.address }
  })
  if (!isUptoPermit2Payload(result.payload)) throw new Error("not an upto Permit2 payload")
  const { permit2Authorization: auth, signature } = result.payload
  return {
    nonce: BigInt(auth.nonce),
    /** The facilitator's `settle` arguments for `amount` (as @x402/evm's facilitator builds them). */
    args: (amount: bigint, to = auth.witness.to) => [
      { permitted: { token: auth.permitted.token, amount: BigInt(auth.permitted.amount) }, nonce: BigInt(auth.nonce), deadline: BigInt(auth.deadline) },
      amount,
      auth.from,
      { to, facilitator: auth.witness.facilitator, validAfter: BigInt(auth.witness.validAfter) },
      signature
    ] as const
  }
}

const simulateSettle = (args: ReadonlyArray<unknown>, from: PrivateKeyAccount = c.relayer) =>
  c.publicClient.simulateContract({ address: x402UptoPermit2ProxyAddress, abi: proxyAndPermit2(), functionName: "settle", args, account: from })

describe("x402 upto contracts on the devnet", () => {
  it("settle what was used, up to the signed maximum, to the signed receiver, once", async () => {
    const permit = await authorize(5_000n)
    const [payerBefore, receiverBefore] = [await c.usdcBalance(c.payer.address), await c.usdcBalance(c.receiver.address)]
    const hash = await c.walletOf(c.relayer).writeContract({ address: x402UptoPermit2ProxyAddress, abi: x402UptoPermit2ProxyABI, functionName: "settle", args: permit.args(1_858n) })
    const receipt = await c.mined(hash)
    expect(parseEventLogs({ abi: x402UptoPermit2ProxyABI, logs: receipt.logs }).map((log) => log.eventName)).toEqual(["Settled"])
    expect(await c.usdcBalance(c.payer.address)).toBe(payerBefore - 1_858n)
    expect(await c.usdcBalance(c.receiver.address)).toBe(receiverBefore + 1_858n)
    const bitmap = await c.publicClient.readContract({ address: PERMIT2_ADDRESS, abi: oursAbi("Permit2"), functionName: "nonceBitmap", args: [c.payer.address, permit.nonce >> 8n] })
    const [word = 0n] = bigints(bitmap, 1)
    expect(word & (1n << (permit.nonce & 255n))).not.toBe(0n)
    // The same authorization again, even for less: Permit2's nonce is spent.
    await expect(simulateSettle(permit.args(1n))).rejects.toThrow("InvalidNonce")
  })

  it("refuse more than the maximum, another caller than the named facilitator, and another receiver", async () => {
    const permit = await authorize(5_000n)
    await expect(simulateSettle(permit.args(5_001n))).rejects.toThrow("AmountExceedsPermitted")
    await expect(simulateSettle(permit.args(5_000n), c.receiver)).rejects.toThrow("UnauthorizedFacilitator")
    await expect(simulateSettle(permit.args(5_000n, c.relayer.address))).rejects.toThrow("InvalidSigner")
    await simulateSettle(permit.args(5_000n)) // the exact maximum is fine
  })
})

describe("the batch-settlement Permit2 deposit collector", () => {
  it("deposits into a channel on a Permit2 witness signature bound to that channel", async () => {
    const config = c.configFor("permit2-deposit")
    const channelId = computeChannelId(config, NETWORK)
    const nonce = 77n
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 600)
    const signature = await c.payer.signTypedData({
      domain: { name: "Permit2", chainId: c.devnet.chainId, verifyingContract: PERMIT2_ADDRESS },
      types: {
        PermitWitnessTransferFrom: [
          { name: "permitted", type: "TokenPermissions" },
          { name: "spender", type: "address" },
          { name: "nonce", type: "uint256" },
          { name: "deadline", type: "uint256" },
          { name: "witness", type: "DepositWitness" }
        ],
        TokenPermissions: [{ name: "token", type: "address" }, { name: "amount", type: "uint256" }],
        DepositWitness: [{ name: "channelId", type: "bytes32" }]
      },
      primaryType: "PermitWitnessTransferFrom",
      message: { permitted: { token: c.usdc, amount: 400n }, spender: officialPermit2DepositCollectorAddress, nonce, deadline, witness: { channelId } }
    })
    const collectorData = encodeAbiParameters([{ type: "uint256" }, { type: "uint256" }, { type: "bytes" }, { type: "bytes" }], [nonce, deadline, signature, "0x"])
    const deposit = (cfg: typeof config) => ({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName: "deposit", args: [cfg, 400n, officialPermit2DepositCollectorAddress, collectorData] }) as const
    // The signature names one channel: another config (another salt) cannot use it.
    await expect(c.publicClient.simulateContract({ ...deposit(c.configFor("elsewhere")), account: c.relayer })).rejects.toThrow()
    await c.mined(await c.walletOf(c.relayer).writeContract(deposit(config)))
    expect(await c.channelState(channelId)).toEqual({ balance: 400n, totalClaimed: 0n })
  })
})
