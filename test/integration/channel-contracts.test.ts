// Our x402BatchSettlement and its ERC-3009 deposit collector, placed by the devnet's start at the addresses the
// official clients use, driven with `@x402/evm`'s own client code (deposit authorization, vouchers), EIP-712 types and
// exported ABI: a deposit, claims on the receiver authorizer's signature, a settle, cooperative refunds and the payer's
// timed withdrawal; stale vouchers, claims above the balance and replays are refused. A devnet of its own: the
// withdrawal test moves the chain's clock.
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from "@x402/evm"
import { computeChannelId } from "@x402/evm/batch-settlement/client"
import { type Abi, encodeFunctionData, type Hex, keccak256, parseEventLogs, type TransactionReceipt, toHex } from "viem"
import { channelContractsPresent } from "../../layers/x402/channelContracts.js"
import { bigints, type ChannelChain, NETWORK, oursAbi, startChannelChain, WITHDRAW_DELAY } from "../support/channelChain.js"
import { officialBatchSettlementAbi, officialMulticall } from "../support/x402Official.js"

let c: ChannelChain
beforeAll(async () => {
  c = await startChannelChain()
}, 60_000)
afterAll(() => c?.devnet.stop())

const ours = () => oursAbi("x402BatchSettlement")

/** The events of a receipt, decoded with `abi`, as `name` + named args. */
const events = (receipt: TransactionReceipt, abi: Abi) =>
  parseEventLogs({ abi, logs: receipt.logs }).map((log) => ({ name: log.eventName, args: log.args }))

/** A call to x402BatchSettlement simulated by `from` (default: the relayer): resolves, or rejects naming the error. */
const simulate = (functionName: string, args: ReadonlyArray<unknown>, from = c.relayer) =>
  c.publicClient.simulateContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: ours(), functionName, args, account: from })

const send = async (functionName: string, args: ReadonlyArray<unknown>, from = c.relayer) =>
  c.mined(await c.walletOf(from).writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName, args }))

describe("x402 channel contracts on the devnet", () => {
  it("are placed by the devnet's start, and the start-up check offers both schemes there", async () => {
    const presence = await channelContractsPresent(c.publicClient, NETWORK)
    expect(presence.present).toEqual(["batch-settlement", "upto"])
    expect(presence.lines).toEqual([])
  })

  it("hash a channel config exactly as @x402/evm does (EIP-712 domain from the chain id and the address)", async () => {
    const config = c.configFor("ids")
    expect(await c.read("getChannelId", [config])).toBe(computeChannelId(config, NETWORK))
    expect(await c.read("CHANNEL_CONFIG_TYPEHASH", [])).toBe(
      keccak256(toHex("ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"))
    )
  })

  it("take a deposit through the ERC-3009 collector on the official client's authorization, once", async () => {
    const payerBefore = await c.usdcBalance(c.payer.address)
    const config = c.configFor("deposit")
    const channelId = computeChannelId(config, NETWORK)
    const { collectorData } = await c.depositPayload(config, 1_000n)
    const receipt = await c.deposit(config, 1_000n, collectorData)

    expect(await c.channelState(channelId)).toEqual({ balance: 1_000n, totalClaimed: 0n })
    // The official facilitator's read of channel state (channels, pendingWithdrawals, refundNonce through Multicall3).
    const read = (functionName: string) => ({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName, args: [channelId] })
    expect(await officialMulticall(c.publicClient.readContract.bind(c.publicClient), [read("channels"), read("pendingWithdrawals"), read("refundNonce")])).toEqual([
      { status: "success", result: [1_000n, 0n] },
      { status: "success", result: [0n, 0] },
      { status: "success", result: 0n }
    ])
    expect(await c.usdcBalance(c.payer.address)).toBe(payerBefore - 1_000n)
    expect(await c.usdcBalance(ERC3009_DEPOSIT_COLLECTOR_ADDRESS)).toBe(0n)
    expect(events(receipt, ours()).map((e) => e.name)).toEqual(expect.arrayContaining(["ChannelCreated", "Deposited"]))
    // The same authorization again: the token has used its nonce.
    await expect(simulate("deposit", [config, 1_000n, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, collectorData])).rejects.toThrow()
    // Nobody but the batch settlement contract may spend an authorization through the collector.
    await expect(
      c.publicClient.simulateContract({
        address: ERC3009_DEPOSIT_COLLECTOR_ADDRESS, abi: oursAbi("ERC3009DepositCollector"), functionName: "collect",
        args: [c.payer.address, c.usdc, 1n, channelId, collectorData], account: c.relayer
      })
    ).rejects.toThrow("OnlyBatchSettlement")
  })

  it("claim vouchers on the receiver authorizer's signature, settle to the receiver, and refuse stale or oversized claims", async () => {
    const { config, channelId } = await c.openChannel("claims", 1_000n)
    const first = await c.claimRow(config, 300n, 250n)
    const claimed = await send("claimWithSignature", [[first], await c.signClaims([first])])
    expect(events(claimed, ours())).toEqual([{ name: "Claimed", args: { channelId, receiver: c.receiver.address, amount: 250n, totalClaimed: 250n } }])
    expect(await c.channelState(channelId)).toEqual({ balance: 1_000n, totalClaimed: 250n })

    const receiverBefore = await c.usdcBalance(c.receiver.address)
    const settled = await send("settle", [c.receiver.address, c.usdc])
    expect(events(settled, officialBatchSettlementAbi)).toEqual([
      { name: "Settled", args: { receiver: c.receiver.address, token: c.usdc, sender: c.relayer.address, amount: 250n } }
    ])
    expect(await c.usdcBalance(c.receiver.address)).toBe(receiverBefore + 250n)
    expect(bigints(await c.read("receivers", [c.receiver.address, c.usdc]), 2)).toEqual([250n, 250n])
    // Nothing left to settle: no transfer, no event.
    expect(events(await send("settle", [c.receiver.address, c.usdc]), ours())).toEqual([])

    const second = await c.claimRow(config, 600n, 500n)
    await send("claimWithSignature", [[second], await c.signClaims([second])])
    // The older voucher again (a stale claim): refused; the current one again: changes nothing.
    await expect(simulate("claimWithSignature", [[first], await c.signClaims([first])])).rejects.toThrow("ClaimBelowClaimed")
    expect(events(await send("claimWithSignature", [[second], await c.signClaims([second])]), ours())).toEqual([])
    expect(await c.channelState(channelId)).toEqual({ balance: 1_000n, totalClaimed: 500n })

    const aboveVoucher = await c.claimRow(config, 600n, 700n)
    await expect(simulate("claimWithSignature", [[aboveVoucher], await c.signClaims([aboveVoucher])])).rejects.toThrow("ClaimAboveVoucher")
    const aboveBalance = await c.claimRow(config, 5_000n, 1_500n)
    await expect(simulate("claimWithSignature", [[aboveBalance], await c.signClaims([aboveBalance])])).rejects.toThrow("ClaimExceedsBalance")
    const forged = await c.claimRow(config, 900n, 900n, c.relayer)
    await expect(simulate("claimWithSignature", [[forged], await c.signClaims([forged])])).rejects.toThrow("InvalidVoucherSignature")
    const third = await c.claimRow(config, 900n, 900n)
    await expect(simulate("claimWithSignature", [[third], await c.signClaims([third], c.relayer)])).rejects.toThrow("InvalidAuthorizerSignature")
    // `claim` without a signature: only the receiver or its authorizer.
    await expect(simulate("claim", [[third]])).rejects.toThrow("Unauthorized")
    await simulate("claim", [[third]], c.receiver)
  })

  it("refund cooperatively on a signed nonce (once) or directly by the receiver, capped at the unclaimed escrow", async () => {
    const { config, channelId } = await c.openChannel("refund", 1_000n)
    const row = await c.claimRow(config, 100n, 100n)
    await send("claimWithSignature", [[row], await c.signClaims([row])])

    const payerBefore = await c.usdcBalance(c.payer.address)
    const signature = await c.signRefund(channelId, 0n, 200n)
    const refunded = await send("refundWithSignature", [config, 200n, 0n, signature])
    expect(events(refunded, ours())).toEqual([{ name: "Refunded", args: { channelId, payer: c.payer.address, amount: 200n, nonce: 0n } }])
    expect(await c.usdcBalance(c.payer.address)).toBe(payerBefore + 200n)
    expect(await c.read("refundNonce", [channelId])).toBe(1n)
    await expect(simulate("refundWithSignature", [config, 200n, 0n, signature])).rejects.toThrow("InvalidRefundNonce")
    await expect(simulate("refundWithSignature", [config, 200n, 1n, await c.signRefund(channelId, 1n, 200n, c.relayer)])).rejects.toThrow("InvalidAuthorizerSignature")
    await expect(simulate("refund", [config, 1n], c.payer)).rejects.toThrow("Unauthorized")

    // Asking for more than is unclaimed returns what is unclaimed (700); claimed funds stay for the receiver.
    await send("refund", [config, 10_000n], c.receiver)
    expect(await c.channelState(channelId)).toEqual({ balance: 100n, totalClaimed: 100n })
    expect(await c.usdcBalance(c.payer.address)).toBe(payerBefore + 900n)
    expect(await c.read("refundNonce", [channelId])).toBe(2n)
  })

  it("closes a channel a full refund drains, and runs claim + refund in one multicall as the facilitator does", async () => {
    const { config, channelId } = await c.openChannel("multicall", 500n)
    const row = await c.claimRow(config, 100n, 0n)
    const data = [
      { functionName: "claimWithSignature", args: [[row], await c.signClaims([row])] },
      { functionName: "refundWithSignature", args: [config, 500n, 0n, await c.signRefund(channelId, 0n, 500n)] }
    ].map(({ functionName, args }) => encode(functionName, args))
    const receipt = await send("multicall", [data])
    expect(events(receipt, ours()).map((e) => e.name)).toEqual(["Refunded", "ChannelClosed"])
    expect(await c.channelState(channelId)).toEqual({ balance: 0n, totalClaimed: 0n })
  })

  it("lets the payer withdraw after withdrawDelay, only what the receiver has not claimed meanwhile", async () => {
    const { config, channelId } = await c.openChannel("withdraw", 1_000n)
    const early = await c.claimRow(config, 100n, 100n)
    await send("claimWithSignature", [[early], await c.signClaims([early])])

    await expect(simulate("initiateWithdraw", [config, 950n], c.payer)).rejects.toThrow("WithdrawAboveEscrow")
    await expect(simulate("initiateWithdraw", [config, 600n], c.relayer)).rejects.toThrow("Unauthorized")
    const initiated = await send("initiateWithdraw", [config, 600n], c.payer)
    expect(events(initiated, ours()).map((e) => e.name)).toEqual(["WithdrawInitiated"])
    const [pending, initiatedAt] = bigints(await c.read("pendingWithdrawals", [channelId]), 2)
    expect(pending).toBe(600n)
    await expect(simulate("finalizeWithdraw", [config], c.payer)).rejects.toThrow("WithdrawDelayNotElapsed")

    // The server claims during the grace period: the escrow left (500) caps the withdrawal.
    const late = await c.claimRow(config, 500n, 500n)
    await send("claimWithSignature", [[late], await c.signClaims([late])])
    await c.testClient.increaseTime({ seconds: WITHDRAW_DELAY })
    await c.testClient.mine({ blocks: 1 })
    const payerBefore = await c.usdcBalance(c.payer.address)
    const finalized = await send("finalizeWithdraw", [config], c.payer)
    expect(events(finalized, ours())).toEqual([{ name: "WithdrawFinalized", args: { channelId, payer: c.payer.address, amount: 500n } }])
    expect(await c.usdcBalance(c.payer.address)).toBe(payerBefore + 500n)
    expect(await c.channelState(channelId)).toEqual({ balance: 500n, totalClaimed: 500n })
    expect(bigints(await c.read("pendingWithdrawals", [channelId]), 2)).toEqual([0n, 0n])
    expect(initiatedAt).toBeGreaterThan(0n)
    await expect(simulate("finalizeWithdraw", [config], c.payer)).rejects.toThrow("NoPendingWithdrawal")
  })
})

const encode = (functionName: string, args: ReadonlyArray<unknown>): Hex =>
  encodeFunctionData({ abi: officialBatchSettlementAbi, functionName, args })
