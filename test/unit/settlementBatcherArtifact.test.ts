import { describe, expect, it } from "@effect/vitest"
import { readFile } from "node:fs/promises"
import { compileContract, contractKey, readContractSource, SETTLEMENT_BATCHER } from "../../layers/devnet/compile.js"
import { settlementBatcherAbi } from "../../layers/devnet/batcherAbi.js"
import { shippedSettlementBatcher } from "../../layers/devnet/settlementBatcher.generated.js"
import { batcherGeneratedPath, generateBatcherArtifact } from "../../layers/devnet/testUsdcArtifact.js"

describe("the shipped SettlementBatcher (layers/devnet/settlementBatcher.generated.ts)", () => {
  it("is what solc makes of contracts/SettlementBatcher.sol today (else: npm run devnet:artifact)", async () => {
    expect(await generateBatcherArtifact()).toBe(await readFile(batcherGeneratedPath, "utf8"))
  }, 120_000)

  it("is what a start deploys, without loading solc", async () => {
    expect(shippedSettlementBatcher.key).toBe(contractKey(SETTLEMENT_BATCHER, await readContractSource(SETTLEMENT_BATCHER)))
    expect(await compileContract(SETTLEMENT_BATCHER)).toEqual({ abi: shippedSettlementBatcher.abi, bytecode: shippedSettlementBatcher.bytecode })
  })

  it("has the functions and the event the hand-written ABI (batcherAbi.ts) calls and decodes", () => {
    for (const item of settlementBatcherAbi) {
      expect(shippedSettlementBatcher.abi).toContainEqual(item)
    }
  })
})
