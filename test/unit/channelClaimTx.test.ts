// The claim, settle and refund transactions of our channel side: the functions, events and errors we encode and decode
// are x402BatchSettlement's as @x402/evm exports its ABI, and the authorizer's signatures recover to the authorizer
// over the scheme's EIP-712 types.
import { describe, expect, it } from "@effect/vitest"
import { claimBatchTypes, refundTypes } from "@x402/evm"
import { type AbiEvent, type AbiFunction, type AbiParameter, decodeFunctionData, type Hex, recoverTypedDataAddress, toEventSelector, toFunctionSelector } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { shippedX402BatchSettlement } from "../../layers/devnet/channels/x402BatchSettlement.generated.js"
import { batchSettlementDomain } from "../../layers/x402/batchSettlement/typedData.js"
import { officialBatchSettlementAbi } from "../support/x402Official.js"
import { batchSettlementAbi, claimCalldata, type ClaimLine, refundCalldata, signClaimBatch, signRefund } from "../../services/channels/claimTx.js"

const authorizer = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
const config = {
  payer: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  payerAuthorizer: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  receiver: authorizer.address.toLowerCase(),
  receiverAuthorizer: authorizer.address.toLowerCase(),
  token: "0x036cbd53842c5426634e7929541ec2318f3dcf7e",
  withdrawDelay: 900,
  salt: `0x${"11".repeat(32)}`
}
const line = (n: number): ClaimLine => ({
  channelId: `0x${n.toString(16).padStart(64, "0")}`,
  config,
  maxClaimable: 10_000n + BigInt(n),
  voucherSignature: `0x${"ab".repeat(65)}`,
  totalClaimed: 5_000n + BigInt(n)
})

const officialFunction = (name: string): AbiFunction => {
  const item = officialBatchSettlementAbi.find((x): x is AbiFunction => x.type === "function" && x.name === name)
  if (item === undefined) throw new Error(`@x402/evm's ABI has no function ${name}`)
  return item
}
/** @x402/evm's ABI declares only `Settled`: the events are checked against the compiled contract. */
const contractEvent = (name: string): AbiEvent => {
  const item = shippedX402BatchSettlement.abi.find((x): x is AbiEvent => x.type === "event" && x.name === name)
  if (item === undefined) throw new Error(`x402BatchSettlement has no event ${name}`)
  return item
}
const errorSignature = (e: { readonly name: string; readonly inputs: ReadonlyArray<AbiParameter> }) => `${e.name}(${e.inputs.map((i) => i.type).join(",")})`
const contractErrors = new Set(shippedX402BatchSettlement.abi.flatMap((x) => (x.type === "error" ? [errorSignature(x)] : [])))

describe("channel claim transactions", () => {
  it("encode and decode x402BatchSettlement's own functions (as in @x402/evm's ABI), events and errors (as the contract declares them)", () => {
    for (const item of batchSettlementAbi) {
      if (item.type === "function") expect(toFunctionSelector(item)).toBe(toFunctionSelector(officialFunction(item.name)))
      if (item.type === "event") expect(toEventSelector(item)).toBe(toEventSelector(contractEvent(item.name)))
      if (item.type === "error") expect(contractErrors.has(errorSignature(item))).toBe(true)
    }
  })

  it("one claim carries every line, in order, under one authorizer signature that recovers to the authorizer", async () => {
    const lines = Array.from({ length: 200 }, (_, i) => line(i + 1))
    const signature = await signClaimBatch(authorizer, 84532, lines)
    const decoded = decodeFunctionData({ abi: batchSettlementAbi, data: claimCalldata(lines, signature) })
    expect(decoded.functionName).toBe("claimWithSignature")
    const [claims, sig] = decoded.args as unknown as [ReadonlyArray<{ totalClaimed: bigint; voucher: { maxClaimableAmount: bigint } }>, Hex]
    expect(claims.map((c) => c.totalClaimed)).toEqual(lines.map((l) => l.totalClaimed))
    expect(sig).toBe(signature)
    const signer = await recoverTypedDataAddress({
      domain: batchSettlementDomain(84532), types: claimBatchTypes, primaryType: "ClaimBatch", signature,
      message: { claims: lines.map((l) => ({ channelId: l.channelId, maxClaimableAmount: l.maxClaimable, totalClaimed: l.totalClaimed })) }
    })
    expect(signer).toBe(authorizer.address)
  })

  it("a refund goes after the claim of what is charged, in one multicall; without a claim it is the refund alone", async () => {
    const l = line(7)
    const refundSignature = await signRefund(authorizer, 84532, l.channelId, 3n, 4_000n)
    expect(await recoverTypedDataAddress({
      domain: batchSettlementDomain(84532), types: refundTypes, primaryType: "Refund", signature: refundSignature,
      message: { channelId: l.channelId, nonce: 3n, amount: 4_000n }
    })).toBe(authorizer.address)
    const claimSignature = await signClaimBatch(authorizer, 84532, [l])
    const both = decodeFunctionData({ abi: batchSettlementAbi, data: refundCalldata({ config, amount: 4_000n, nonce: 3n, refundSignature, claim: { line: l, signature: claimSignature } }) })
    expect(both.functionName).toBe("multicall")
    const [calls] = both.args as unknown as [ReadonlyArray<Hex>]
    expect(calls.map((data) => decodeFunctionData({ abi: batchSettlementAbi, data }).functionName)).toEqual(["claimWithSignature", "refundWithSignature"])
    const alone = decodeFunctionData({ abi: batchSettlementAbi, data: refundCalldata({ config, amount: 4_000n, nonce: 3n, refundSignature, claim: undefined }) })
    expect(alone.functionName).toBe("refundWithSignature")
  })
})
