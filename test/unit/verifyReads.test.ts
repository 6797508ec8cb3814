// The verification's token reads: one JSON-RPC batch, viem's reads where the provider refuses batches, and the same
// retryable refusal when the chain does not answer; the balance read travels with the verified payment.
import { Effect, Either, Option } from "effect"
import { describe, expect, it } from "vitest"
import { createPublicClient, custom, decodeFunctionData, encodeFunctionResult, type Hex, keccak256 } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import type { ChainShape } from "../../layers/Chain.js"
import { transferWithAuthorizationTypes, usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { BatchRefused, type RpcCall, RpcBatchError } from "../../layers/rpcBatch.js"
import { makeVerify } from "../../layers/x402/verify.js"

const payer = privateKeyToAccount(generatePrivateKey())
const treasury = privateKeyToAccount(generatePrivateKey()).address
const usdc = { address: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", name: "USDC", version: "2" } as const
const PRICE = 11_000n

/** What the token answers an eth_call with: this balance, no authorization used. */
const answer = (data: Hex, balance: bigint): Hex => {
  const call = decodeFunctionData({ abi: usdcAbi, data })
  if (call.functionName === "balanceOf") return encodeFunctionResult({ abi: usdcAbi, functionName: "balanceOf", result: balance })
  if (call.functionName === "authorizationState") return encodeFunctionResult({ abi: usdcAbi, functionName: "authorizationState", result: false })
  throw new Error(`unexpected call ${call.functionName}`)
}
const dataOf = (params: unknown): Hex => {
  const [tx] = params as ReadonlyArray<{ data: Hex }>
  if (tx === undefined) throw new Error("no call")
  return tx.data
}

const chainWith = (rpcBatch: ChainShape["rpcBatch"], viemCalls: { n: number }, balance: bigint): ChainShape => ({
  mode: "devnet",
  rpcUrl: "http://127.0.0.1:1",
  chainId: 84532,
  network: "base-sepolia",
  usdc,
  treasury,
  publicClient: createPublicClient({
    transport: custom({
      request: async ({ method, params }: { method: string; params: unknown }) => {
        if (method !== "eth_call") throw new Error(`unexpected ${method}`)
        viemCalls.n++
        return answer(dataOf(params), balance)
      }
    }, { retryCount: 0 })
  }),
  rpcBatch,
  settlement: "local",
  signer: Option.none(),
  batcher: Option.none(),
  confirmations: 1,
  devAccounts: []
})

const header = async () => {
  const now = BigInt(Math.floor(Date.now() / 1000))
  const message = { from: payer.address, to: treasury, value: PRICE, validAfter: now - 600n, validBefore: now + 600n, nonce: keccak256(generatePrivateKey()) }
  const signature = await payer.signTypedData({
    domain: { name: usdc.name, version: usdc.version, chainId: 84532, verifyingContract: usdc.address },
    types: transferWithAuthorizationTypes,
    primaryType: "TransferWithAuthorization",
    message
  })
  const authorization = { ...message, value: message.value.toString(), validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString() }
  return Buffer.from(JSON.stringify({ x402Version: 1, scheme: "exact", network: "base-sepolia", payload: { signature, authorization } })).toString("base64")
}

const verifyWith = async (chain: ChainShape) =>
  Effect.runPromise(Effect.either(makeVerify(chain, { paymentMinValiditySeconds: 6 }, { allowedFactories: [], verifyTimeoutMs: 1_000, deploySeconds: 60 }).verify(await header(), PRICE)))

describe("the verification's token reads", () => {
  it("reads both in one batch (no viem request), and refuses a payer whose balance is short", async () => {
    const batches: Array<ReadonlyArray<RpcCall>> = []
    const viemCalls = { n: 0 }
    const batch = (balance: bigint) => async (calls: ReadonlyArray<RpcCall>) => {
      batches.push(calls)
      return calls.map((c) => answer(dataOf(c.params), balance))
    }
    const ok = await verifyWith(chainWith(batch(PRICE), viemCalls, PRICE))
    expect(Either.isRight(ok)).toBe(true)
    expect(batches).toHaveLength(1)
    expect(batches[0]?.map((c) => c.method)).toEqual(["eth_call", "eth_call"])
    expect(viemCalls.n).toBe(0)
    const short = await verifyWith(chainWith(batch(PRICE - 1n), viemCalls, PRICE))
    expect(Either.isLeft(short) && short.left.reason).toBe("insufficient_funds")
  })

  it("hands the balance it read to the reservation (which counts the payer's unsettled payments against it)", async () => {
    const rich = await verifyWith(chainWith(async (calls) => calls.map((c) => answer(dataOf(c.params), 5n * PRICE)), { n: 0 }, PRICE))
    expect(Either.isRight(rich) && rich.right.balance).toBe(5n * PRICE)
  })

  it("reads through viem where the provider refuses batches, from then on", async () => {
    const viemCalls = { n: 0 }
    let tried = 0
    const chain = chainWith(async () => {
      tried++
      throw new BatchRefused("no batches here")
    }, viemCalls, PRICE)
    const verify = makeVerify(chain, { paymentMinValiditySeconds: 6 }, { allowedFactories: [], verifyTimeoutMs: 1_000, deploySeconds: 60 }).verify
    for (let i = 0; i < 2; i++) expect(Either.isRight(await Effect.runPromise(Effect.either(verify(await header(), PRICE))))).toBe(true)
    expect(tried).toBe(1)
    expect(viemCalls.n).toBe(4)
  })

  it("answers the same retryable refusal as before when the chain does not answer", async () => {
    const refused = await verifyWith(chainWith(async () => {
      throw new RpcBatchError("the RPC did not answer within 10000 ms")
    }, { n: 0 }, PRICE))
    expect(Either.isLeft(refused) && refused.left.reason).toBe("unexpected_verify_error")
    expect(Either.isLeft(refused) && refused.left.details).toEqual({ retryable: true })
  })
})
