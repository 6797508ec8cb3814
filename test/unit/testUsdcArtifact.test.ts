import { describe, expect, it } from "@effect/vitest"
import { readFile } from "node:fs/promises"
import { compileTestUsdc, readTestUsdcSource, testUsdcKey } from "../../layers/devnet/compile.js"
import { generateArtifact, generatedPath } from "../../layers/devnet/testUsdcArtifact.js"
import { shippedTestUsdc } from "../../layers/devnet/testUsdc.generated.js"

describe("the shipped TestUSDC (layers/devnet/testUsdc.generated.ts)", () => {
  it("is what solc makes of contracts/TestUSDC.sol today (else: npm run devnet:artifact)", async () => {
    expect(await generateArtifact()).toBe(await readFile(generatedPath, "utf8"))
  }, 120_000)

  it("is what a start deploys, without loading solc", async () => {
    expect(shippedTestUsdc.key).toBe(testUsdcKey(await readTestUsdcSource()))
    expect(await compileTestUsdc()).toEqual({ abi: shippedTestUsdc.abi, bytecode: shippedTestUsdc.bytecode })
  })
})
