// Two instances behind a round-robin balancer (test/support/twoHosts.ts: production mode, own data directories, one
// PostgreSQL, one chain, one set of secrets, TRUST_PROXY): every request may reach either instance, so a paid call's
// 402 and its paid retry land on different ones. Through the balancer: registrations and paid calls with x402 v1
// (x402-fetch) and v2 (@x402/fetch), MCP with the official SDK client (free tools and the paid `execute`), a chain, a
// dispute refunded on chain, a withdrawal, a webhook delivered once per event; at the end each instance's
// reconciliation reads ledger = chain.
import { describe, expect, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { x402Client as x402McpClient } from "@x402/core/client"
import { isPaymentRequiredV2 } from "@x402/core/schemas"
import { toClientEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect } from "effect"
import { createTestClient, http } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { fakeAgent } from "../support/agents.js"
import { call, type Envelope, paidCall, walletAuth } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { mcpClient } from "../support/mcp.js"
import { receiver } from "../support/receivers.js"
import { echoCapability } from "../support/scenario.js"
import { until } from "../support/twoProcesses.js"
import { TWO_HOSTS_OPERATOR, type TwoHosts, twoHosts } from "../support/twoHosts.js"

const NETWORK = "eip155:84532"
const SMALL_PRICE = 11_000n // the disputed agent's 0.01 + 0.001

/** An x402 v2 client paying from `account` in the test chain's USDC. */
const v2Client = <C extends x402Client | x402McpClient>(client: C, account: PrivateKeyAccount, usdc: string): C => {
  client.register(NETWORK, new ExactEvmScheme(toClientEvmSigner(account)))
  client.setSpendControls({ allowedAssets: [{ network: NETWORK, asset: usdc, maxAmountPerPayment: "2000000" }] })
  return client
}

const api = (hosts: TwoHosts, path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  call(`${hosts.url}${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    ...(init.json === undefined ? {} : { json: init.json }),
    headers: init.headers ?? {}
  })

/** A paid registration (x402 v1) of an echo agent at `url` costing `basePrice`; premium when `premium` (released at once). */
const register = async (hosts: TwoHosts, owner: PrivateKeyAccount, url: string, basePrice: string, premium: boolean) => {
  const created = await paidCall(owner, `${hosts.url}/api/v1/agents`, {
    json: registration(owner, { capabilities: [echoCapability({ pricing: { model: "per-request", basePrice, currency: "USDC" } })], endpoints: { execution: url } })
  })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  const id = String(created.body.data.id)
  if (premium) {
    const pinned = await api(hosts, `/api/v1/operator/agents/${id}/trust-tier`, { json: { tier: "premium", reason: "two-hosts test" }, headers: TWO_HOSTS_OPERATOR })
    expect(pinned.status, JSON.stringify(pinned.body)).toBe(200)
  }
  return id
}

/** A paid MCP tool call: unpaid first (x402's PaymentRequired), then paid in `_meta["x402/payment"]`. */
const paidTool = async (client: Client, payer: x402McpClient, name: string, args: Record<string, unknown>) => {
  const first = await client.callTool({ name, arguments: args })
  expect(first.isError).toBe(true)
  if (!isPaymentRequiredV2(first.structuredContent)) throw new Error(`no PaymentRequired: ${JSON.stringify(first)}`)
  const payment = await payer.createPaymentPayload(JSON.parse(JSON.stringify(first.structuredContent)))
  return client.callTool({ name, arguments: args, _meta: { "x402/payment": payment } })
}

/**
 * One request through the balancer: a paid call is two (the 402, then the paid retry), so strict turns would have every
 * paid retry land on the same instance; one request in between moves the next one to the other.
 */
const nudge = (hosts: TwoHosts) => call(`${hosts.url}/health`)

/** The upstreams that answered requests to `path` with a status below 300. */
const answeredBy = (hosts: TwoHosts, path: string) =>
  new Set(hosts.balancer.routed.filter((r) => r.path === path && r.status > 0 && r.status < 300).map((r) => r.upstream))

describe("two hosts behind a round-robin balancer", () => {
  it.scopedLive("paid calls (x402 v1 and v2), MCP with the SDK client, a chain, a dispute, a withdrawal and webhooks work across both; ledger = chain on each", () =>
    Effect.gen(function* () {
      const hosts = yield* twoHosts({ payers: 6 })
      const { chain } = hosts
      const [earnerOwner, smallOwner, v1Payer, v2Payer, mcpPayer, disputer] = chain.payers
      if (earnerOwner === undefined || smallOwner === undefined || v1Payer === undefined || v2Payer === undefined || mcpPayer === undefined || disputer === undefined) {
        throw new Error("not enough payers")
      }
      const echo = yield* fakeAgent("echo")
      const hook = yield* receiver([200])

      // Registrations (x402 v1): each 402 from one instance, the paid retry on the other.
      const earner = yield* Effect.promise(() => register(hosts, earnerOwner, echo.url, "1.00", true))
      const small = yield* Effect.promise(() => register(hosts, smallOwner, echo.url, "0.01", false))
      const chainable = yield* Effect.promise(async () =>
        api(hosts, `/api/v1/agents/${earner}`, { method: "PATCH", json: { chainSettings: { chain_enabled: true, chain_max_depth: 3 } }, headers: await walletAuth(earnerOwner, earner) }))
      expect(chainable.status, JSON.stringify(chainable.body)).toBe(200)
      const subscribed = yield* Effect.promise(async () =>
        api(hosts, "/api/v1/webhooks", { json: { agentId: earner, url: hook.url, events: ["execution.completed"] }, headers: await walletAuth(earnerOwner, earner) }))
      expect(subscribed.status, JSON.stringify(subscribed.body)).toBe(201)

      // Paid calls with x402 v1 (x402-fetch) and v2 (@x402/fetch).
      const completed: Array<string> = []
      for (let i = 0; i < 3; i++) {
        if (i % 2 === 1) yield* Effect.promise(() => nudge(hosts))
        const paid = yield* Effect.promise(() =>
          paidCall(v1Payer, `${hosts.url}/api/v1/execute`, { json: { targetAgentId: earner, capabilityId: "echo", input: { text: `v1 ${i}` } } }))
        expect(paid.status, JSON.stringify(paid.body)).toBe(200)
        expect(paid.headers.get("x-payment-response")).not.toBeNull()
        completed.push(paid.body.data.requestId)
      }
      const v2Fetch = wrapFetchWithPayment(fetch, v2Client(new x402Client(), v2Payer, chain.usdc))
      for (let i = 0; i < 2; i++) {
        if (i % 2 === 1) yield* Effect.promise(() => nudge(hosts))
        const paid = yield* Effect.promise(async () => {
          const response = await v2Fetch(`${hosts.url}/api/v1/execute`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ targetAgentId: earner, capabilityId: "echo", input: { text: `v2 ${i}` } })
          })
          return { status: response.status, headers: response.headers, body: (await response.json()) as Envelope }
        })
        expect(paid.status, JSON.stringify(paid.body)).toBe(200)
        expect(paid.headers.get("payment-response")).not.toBeNull()
        completed.push(paid.body.data.requestId)
      }
      expect(answeredBy(hosts, "/api/v1/execute").size, "paid executions answered by both instances").toBe(2)

      // A chain with a budget (x402 v1): its unspent budget goes back to the payer.
      const chained = yield* Effect.promise(() =>
        paidCall(v1Payer, `${hosts.url}/api/v1/execute`, { json: { targetAgentId: earner, capabilityId: "echo", input: { text: "chain" } }, headers: { "X-Chain-Budget": "1.50" } }))
      expect(chained.status, JSON.stringify(chained.body)).toBe(200)
      completed.push(chained.body.data.requestId)
      const chainId: string = chained.body.data.chain.chainId

      // MCP with the official SDK client: connect, free tools and the paid `execute`, every request on the next instance.
      const { client } = yield* mcpClient("two-hosts", `${hosts.url}/mcp`)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name)).toContain("execute")
      for (let i = 0; i < 3; i++) {
        const tags = yield* Effect.promise(() => client.callTool({ name: "list_tags", arguments: {} }))
        expect(tags.isError ?? false, JSON.stringify(tags)).toBe(false)
      }
      const agent = yield* Effect.promise(() => client.callTool({ name: "get_agent", arguments: { agentId: earner } }))
      expect(agent.structuredContent).toMatchObject({ agent: { id: earner } })
      const chainStatus = yield* Effect.promise(() => client.callTool({ name: "get_chain_status", arguments: { chainId } }))
      expect(chainStatus.isError ?? false, JSON.stringify(chainStatus)).toBe(false)
      const hired = yield* Effect.promise(() =>
        paidTool(client, v2Client(new x402McpClient(), mcpPayer, chain.usdc), "execute", { targetAgentId: earner, capabilityId: "echo", input: { text: "mcp" } }))
      expect(hired.isError ?? false, JSON.stringify(hired)).toBe(false)
      expect(hired.structuredContent).toMatchObject({ status: "completed", output: { echo: { text: "mcp" } } })
      const hiredContent: unknown = hired.structuredContent
      completed.push(typeof hiredContent === "object" && hiredContent !== null && "requestId" in hiredContent ? String(hiredContent.requestId) : "")
      expect(answeredBy(hosts, "/mcp").size, "MCP requests answered by both instances").toBe(2)

      // A dispute through the balancer, resolved for the client: the payer is refunded on chain.
      const disputedCall = yield* Effect.promise(() =>
        paidCall(disputer, `${hosts.url}/api/v1/execute`, { json: { targetAgentId: small, capabilityId: "echo", input: { text: "wrong" } } }))
      expect(disputedCall.status, JSON.stringify(disputedCall.body)).toBe(200)
      const clientId = disputedCall.headers.get("x-client-id") ?? ""
      const [row] = yield* Effect.promise(() => hosts.query<{ transaction_id: string }>("SELECT transaction_id FROM executions WHERE id = $1", [disputedCall.body.data.requestId]))
      const afterPaying = yield* Effect.promise(() => chain.balanceOf(disputer.address))
      const opened = yield* Effect.promise(() =>
        api(hosts, "/api/v1/disputes", { json: { transactionId: row?.transaction_id, reason: "quality", evidence: "the answer was wrong" }, headers: { "X-Client-Id": clientId } }))
      expect(opened.status, JSON.stringify(opened.body)).toBe(201)
      const resolved = yield* Effect.promise(() =>
        api(hosts, `/api/v1/operator/disputes/${opened.body.data.disputeId}/resolve`, { json: { resolution: "resolved_client", notes: "two-hosts test" }, headers: TWO_HOSTS_OPERATOR }))
      expect(resolved.status, JSON.stringify(resolved.body)).toBe(200)
      yield* Effect.promise(() => until(() => chain.balanceOf(disputer.address), (b) => b === afterPaying + SMALL_PRICE, 30_000, "the dispute's refund on chain"))

      // A withdrawal of the earner's earnings (0.85 of each call): 2.00 asked, 1.90 paid to its wallet.
      const ownerBefore = yield* Effect.promise(() => chain.balanceOf(earnerOwner.address))
      const accepted = yield* Effect.promise(async () =>
        api(hosts, "/api/v1/payments/withdraw", { json: { agentId: earner, amount: "2.00" }, headers: await walletAuth(earnerOwner, earner) }))
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(202)
      yield* Effect.promise(() =>
        until(() => api(hosts, `/api/v1/payments/withdrawal/${accepted.body.data.withdrawalId}`), (r) => r.body.data?.status === "completed", 30_000, "the withdrawal"))
      expect((yield* Effect.promise(() => chain.balanceOf(earnerOwner.address))) - ownerBefore).toBe(1_900_000n)

      // Each completed execution of the earner reached the webhook once.
      const requestIdsOf = () => hook.received.map((r) => String(JSON.parse(r.body).data.requestId))
      yield* Effect.promise(() => until(async () => requestIdsOf(), (ids) => completed.every((id) => ids.includes(id)), 30_000, "webhook deliveries"))

      // Ledger = chain on each instance, at a block past every treasury transaction's confirmations.
      const mine = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) })
      for (const host of hosts.hosts) {
        const current = yield* Effect.promise(() =>
          until(async () => {
            await mine.mine({ blocks: 5 })
            const r = await call(`${host.baseUrl}/api/v1/operator/treasury/reconciliation`, { headers: TWO_HOSTS_OPERATOR })
            return r.body.data?.current
          }, (c) => c?.drift === "0" && c.inFlightIncoming === "0" && c.inFlightOutgoing === "0", 30_000, `reconciliation on ${host.baseUrl}`))
        expect(BigInt(current.chainBalance)).toBe(yield* Effect.promise(() => chain.balanceOf(chain.treasury)))
      }
      expect(requestIdsOf().sort(), "one delivery per event, none twice").toEqual([...completed].sort())
    }), { timeout: 180_000 })
})
