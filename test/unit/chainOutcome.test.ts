import { describe, expect, it } from "@effect/vitest"
import { decodeFunctionData, encodeAbiParameters, encodeEventTopics, type Hex, parseSignature } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { settlementBatcherAbi } from "../../layers/devnet/batcherAbi.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { batchCalldata, batchGas, paidInBatch, type ReceiptLog, singleCalldata } from "../../services/payments/chainOutcome.js"
import { paidBack } from "../../services/remainders/Remainders.js"

type Address = `0x${string}`
const token: Address = "0x1111111111111111111111111111111111111111"
const batcher: Address = "0x2222222222222222222222222222222222222222"
const treasury: Address = "0x3333333333333333333333333333333333333333"
const alice: Address = "0xaAaAaAaaAaAaAaaAaAAAAAAAAaaaAaAaAaaAaaAa"
const bob: Address = "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB"
const chain = { usdc: { address: token, name: "USDC", version: "2" }, treasury } as const
const nonce = (n: number): Hex => `0x${n.toString(16).padStart(64, "0")}`

const log = (address: Address, topics: ReadonlyArray<Hex | ReadonlyArray<Hex> | null>, data: Hex): ReceiptLog =>
  ({ address, topics: topics.filter((t): t is Hex => typeof t === "string"), data })
const settled = (from: Address, n: number, index: number, ok: boolean, asToken: Address = token) =>
  log(batcher, encodeEventTopics({ abi: settlementBatcherAbi, eventName: "AuthorizationSettled", args: { token: asToken, from, nonce: nonce(n) } }),
    encodeAbiParameters([{ type: "uint256" }, { type: "bool" }], [BigInt(index), ok]))
const used = (from: Address, n: number) =>
  log(token, encodeEventTopics({ abi: usdcAbi, eventName: "AuthorizationUsed", args: { authorizer: from, nonce: nonce(n) } }), "0x")
const transfer = (from: Address, value: bigint, to: Address = treasury) =>
  log(token, encodeEventTopics({ abi: usdcAbi, eventName: "Transfer", args: { from, to } }), encodeAbiParameters([{ type: "uint256" }], [value]))
/** What the token and the batcher log for one item the token accepted. */
const paid = (from: Address, n: number, index: number, value: bigint) => [used(from, n), transfer(from, value), settled(from, n, index, true)]
const payment = (payer: Address, n: number, amount: bigint) => ({ payer, nonce: nonce(n), amount })

describe("reading a batch's receipt per payment (paidInBatch)", () => {
  it("pays the items the batcher reported ok with their AuthorizationUsed and Transfer, in any order, and no others", () => {
    const logs = [...paid(alice, 1, 0, 11n), settled(bob, 2, 1, false), ...paid(bob, 3, 2, 11n)]
    const result = paidInBatch(chain, batcher, { status: "success", logs }, [payment(bob, 3, 11n), payment(bob, 2, 11n), payment(alice, 1, 11n)])
    expect(result).toEqual([true, false, true])
  })

  it("counts each Transfer for one payment only: two payments of one payer and amount need two transfers", () => {
    const logs = [used(alice, 1), used(alice, 2), transfer(alice, 11n), settled(alice, 1, 0, true), settled(alice, 2, 1, true)]
    expect(paidInBatch(chain, batcher, { status: "success", logs }, [payment(alice, 1, 11n), payment(alice, 2, 11n)])).toEqual([true, false])
  })

  it("is not fooled by a report without the token's own logs, another token, a transfer elsewhere, or a reverted batch", () => {
    const withoutUsed = [transfer(alice, 11n), settled(alice, 1, 0, true)]
    const otherToken = [used(alice, 1), transfer(alice, 11n), settled(alice, 1, 0, true, bob)]
    const elsewhere = [used(alice, 1), transfer(alice, 11n, bob), settled(alice, 1, 0, true)]
    const wrongAmount = [used(alice, 1), transfer(alice, 10n), settled(alice, 1, 0, true)]
    for (const logs of [withoutUsed, otherToken, elsewhere, wrongAmount]) {
      expect(paidInBatch(chain, batcher, { status: "success", logs }, [payment(alice, 1, 11n)])).toEqual([false])
    }
    expect(paidInBatch(chain, batcher, { status: "reverted", logs: paid(alice, 1, 0, 11n) }, [payment(alice, 1, 11n)])).toEqual([false])
  })
})

describe("reading a receipt for the treasury's own authorizations (paidBack: metered remainders)", () => {
  const back = (to: Address, n: number, amount: bigint) => ({ toAddress: to, authNonce: nonce(n), amount })
  const sentBack = (to: Address, n: number, index: number, value: bigint) => [used(treasury, n), transfer(treasury, value, to), settled(treasury, n, index, true)]

  it("pays a remainder when the treasury's authorization moved exactly its amount to its payer, batched or sent straight to the token", () => {
    const logs = [...sentBack(alice, 1, 0, 5n), ...sentBack(bob, 2, 1, 7n)]
    expect(paidBack(chain, { status: "success", logs, to: batcher }, [back(bob, 2, 7n), back(alice, 1, 5n)])).toEqual([true, true])
    // Straight to the token: no batcher report to require.
    expect(paidBack(chain, { status: "success", logs: [used(treasury, 3), transfer(treasury, 4n, alice)], to: token }, [back(alice, 3, 4n)])).toEqual([true])
  })

  it("is not fooled by a transfer the other way, to another payer, or a batch that did not report the item ok", () => {
    const otherWay = [used(treasury, 1), transfer(alice, 5n, treasury), settled(treasury, 1, 0, true)]
    const otherPayer = [used(treasury, 1), transfer(treasury, 5n, bob), settled(treasury, 1, 0, true)]
    const notOk = [used(treasury, 1), transfer(treasury, 5n, alice), settled(treasury, 1, 0, false)]
    for (const logs of [otherWay, otherPayer, notOk]) {
      expect(paidBack(chain, { status: "success", logs, to: batcher }, [back(alice, 1, 5n)])).toEqual([false])
    }
  })
})

describe("a batch's gas limit (batchGas)", () => {
  it("covers the largest batch SETTLEMENT_BATCH_MAX allows within a 30M-gas block", () => {
    expect(batchGas(200)).toBeLessThan(30_000_000n)
  })
})

describe("the calldata of a settlement (singleCalldata, batchCalldata)", () => {
  it("carries each authorization's r, s and v as viem parses them from the signature", async () => {
    const account = privateKeyToAccount(generatePrivateKey())
    for (let i = 0; i < 8; i++) {
      const signature = await account.signMessage({ message: `m${i}` })
      const p = { payer: account.address, payTo: treasury, asset: token, network: "base-sepolia", amount: 11n, nonce: nonce(i), validAfter: 1n, validBefore: 2n, signature, headerSha256: "", payload: { x402Version: 1, scheme: "exact", network: "base-sepolia", payload: { signature, authorization: { from: account.address, to: treasury, value: "11", validAfter: "1", validBefore: "2", nonce: nonce(i) } } } } as const
      const expected = parseSignature(signature)
      const single = decodeFunctionData({ abi: usdcAbi, data: singleCalldata(p) })
      expect(single.args.slice(6)).toEqual([Number(expected.v), expected.r, expected.s])
      const batch = decodeFunctionData({ abi: settlementBatcherAbi, data: batchCalldata(token, [p]) })
      expect(batch.args[1]).toEqual([expect.objectContaining({ v: Number(expected.v), r: expected.r, s: expected.s, from: account.address, value: 11n })])
    }
  })
})
