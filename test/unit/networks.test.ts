// Two networks in one challenge: x402 v1 bodies list only the networks v1 can name, v2 lists each by its CAIP-2 id.
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { isX402V1Network } from "../../layers/x402/networks.js"
import type { PaymentRequirements } from "../../layers/x402/requirements.js"
import { paymentRequiredV2 } from "../../layers/x402/v2.js"
import { PaymentRequired, PaymentRequiredResponse } from "../../src/domain/Errors.js"

const entry = (network: string, asset: string): PaymentRequirements => ({
  scheme: "exact",
  network,
  maxAmountRequired: "11000",
  resource: "http://127.0.0.1/api/v1/execute",
  description: "Echo",
  mimeType: "application/json",
  payTo: `0x${"ab".repeat(20)}`,
  maxTimeoutSeconds: 120,
  asset,
  extra: { name: "USDC", version: "2" }
})
const accepts = [entry("base", `0x${"01".repeat(20)}`), entry("ethereum", `0x${"02".repeat(20)}`)]

describe("networks in a 402", () => {
  it("x402 v1 names Base and not Ethereum (its client fails on a name it does not know)", () => {
    expect(isX402V1Network("base")).toBe(true)
    expect(isX402V1Network("base-sepolia")).toBe(true)
    expect(isX402V1Network("ethereum")).toBe(false)
  })

  it("the v1 body leaves out the networks v1 cannot name", () => {
    const body = Schema.encodeSync(PaymentRequiredResponse)(new PaymentRequired({ message: "pay", details: {}, accepts }))
    expect(body.accepts.map((a) => a.network)).toEqual(["base"])
  })

  it("the v2 challenge offers every network by its CAIP-2 id, in order, each with its own asset", () => {
    const ids: Record<string, string> = { base: "eip155:8453", ethereum: "eip155:1" }
    const v2 = paymentRequiredV2({ accepts, error: "payment_required" }, (network) => ids[network] ?? "")
    expect(v2.accepts.map((a) => [a.network, a.asset])).toEqual([["eip155:8453", accepts[0]!.asset], ["eip155:1", accepts[1]!.asset]])
  })
})
