// Issue 31 item 4: found where x402 clients already look. The execute 402 carries x402 v2's `bazaar` discovery
// extension (how to call the capability, its input and output schemas), and /discovery/resources lists every active
// agent's capabilities in the facilitator discovery format; both read with the official x402 packages' schemas, and an
// official v2 client pays a capability knowing only what discovery said.
import { expect, layer } from "@effect/vitest"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { PaymentRequiredV2Schema, PaymentRequirementsV2Schema } from "@x402/core/schemas"
import type { PaymentRequirements } from "@x402/core/types"
import { toClientEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect } from "effect"
import { createRequire } from "node:module"
import { inject } from "vitest"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, registerAgent } from "../support/scenario.js"

const require = createRequire(import.meta.url)
const Ajv2020: typeof import("ajv/dist/2020.js").default = require("ajv/dist/2020.js")

interface BazaarExtension {
  readonly info: { readonly input: { readonly type: string; readonly method: string; readonly bodyType: string; readonly body: Record<string, unknown> } }
  readonly schema: Record<string, unknown>
}

/** What the bazaar's facilitator does with an extension: its `info` must pass its own `schema`. */
const validBazaar = (extension: BazaarExtension) => {
  const validate = new Ajv2020({ strict: false, allErrors: true }).compile(extension.schema)
  return validate(extension.info) ? [] : validate.errors
}

/** The facilitator discovery list (x402 bazaar `DiscoveryResourcesResponse`), its accepts in @x402/core's v2 type. */
interface DiscoveryResourcesResponse {
  readonly x402Version: number
  readonly items: ReadonlyArray<{ resource: string; type: string; x402Version: number; accepts: Array<PaymentRequirements>; lastUpdated: string; metadata?: Record<string, unknown> }>
  readonly pagination: { readonly limit: number; readonly offset: number; readonly total: number }
}

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { excludeTestServices: true })("x402 discovery (issue 31)", (it) => {
  it.scoped("the execute 402 declares the capability in the bazaar extension, valid against its own schema", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url)
      const answer = yield* Effect.promise(() => fetch(`${baseUrl}/api/v1/execute`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "hi" } })
      }))
      expect(answer.status).toBe(402)
      const required = PaymentRequiredV2Schema.parse(decodePaymentRequiredHeader(answer.headers.get("PAYMENT-REQUIRED") ?? ""))
      const bazaar = required.extensions?.["bazaar"] as BazaarExtension
      expect(bazaar.info.input).toEqual({ type: "http", method: "POST", bodyType: "json", body: { targetAgentId: agentId, capabilityId: "echo", input: { text: "example" } } })
      expect(validBazaar(bazaar)).toEqual([])
      expect(bazaar.schema).toMatchObject({ properties: { input: { properties: { body: { properties: { input: echoCapability().inputSchema } } } } } })
      expect(required.extensions?.["payment-identifier"]).toBeDefined()
    }))

  it.scoped("/discovery/resources lists each active agent's capabilities with price and bazaar; an official v2 client pays one from it", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(2), agent.url, {
        capabilities: [echoCapability(), echoCapability({ id: "shout", name: "Shout", pricing: { model: "per-request", basePrice: "0.02", currency: "USDC" } })]
      })
      const list = yield* Effect.promise(async () => (await fetch(`${baseUrl}/discovery/resources?type=http&limit=100`)).json() as Promise<DiscoveryResourcesResponse>)
      expect(list.x402Version).toBe(2)
      const mine = list.items.filter((item) => item.metadata?.["agentId"] === agentId)
      expect(mine.map((item) => item.metadata?.["capabilityId"])).toEqual(["echo", "shout"])
      for (const item of mine) {
        expect(item.type).toBe("http")
        for (const accepts of item.accepts) PaymentRequirementsV2Schema.parse(accepts)
        expect(validBazaar(item.metadata?.["bazaar"] as BazaarExtension)).toEqual([])
        expect(Number.isNaN(Date.parse(item.lastUpdated))).toBe(false)
      }
      expect(mine.map((item) => item.accepts[0]?.amount)).toEqual(["11000", "21000"])
      expect(mine[0]?.accepts[0]).toMatchObject({ scheme: "exact", network: "eip155:84532" })
      expect(list.pagination).toMatchObject({ limit: 100, offset: 0, total: list.items.length })
      const paged = yield* Effect.promise(async () => (await fetch(`${baseUrl}/discovery/resources?limit=1&offset=1`)).json() as Promise<DiscoveryResourcesResponse>)
      expect(paged.items).toHaveLength(1)
      expect(paged.pagination.total).toBe(list.pagination.total)
      const mcp = yield* Effect.promise(async () => (await fetch(`${baseUrl}/discovery/resources?type=mcp`)).json() as Promise<DiscoveryResourcesResponse>)
      expect(mcp.items).toEqual([])
      expect((yield* Effect.promise(() => call(`${baseUrl}/discovery/resources?limit=0`))).status).toBe(400)

      // A discovery client calls the resource as the bazaar says, paying with the official v2 client.
      const shout = mine[1]!
      const bazaar = shout.metadata?.["bazaar"] as BazaarExtension
      const client = new x402Client()
        .register("eip155:84532", new ExactEvmScheme(toClientEvmSigner(devAccount(3))))
        .setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset: inject("usdcAddress"), maxAmountPerPayment: "100000" }] })
      const paid = yield* Effect.promise(() => wrapFetchWithPayment(fetch, client)(shout.resource, {
        method: bazaar.info.input.method,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...bazaar.info.input.body, input: { text: "found you" } })
      }))
      const body = yield* Effect.promise(() => paid.json() as Promise<{ success: boolean; data: { status: string; cost: { total?: string; agentFee: string } } }>)
      expect(paid.status, JSON.stringify(body)).toBe(200)
      expect(body.data).toMatchObject({ status: "completed", cost: { agentFee: "0.020000" } })
    }))
})
