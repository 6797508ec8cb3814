// Issue 31, against a real service process (the start script, the run's devnet, a 1-second devnet hold):
// an agent written only from sdk/README.md registers, earns from paid calls (x402 v2, one of them async) and withdraws;
// then the demo's whole flow (src/tools/demo/flow.ts), whose money table must match the chain at zero drift.
import { agentOwner, ConflictError, createAgent, marketplace, toMicro } from "@agent-marketplace/sdk"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, inject, it } from "vitest"
import { moneyTable, runDemo } from "../../src/tools/demo/flow.js"
import { devAccount, usdcBalance } from "../support/clients.js"
import { PROCESS_OPERATOR_TOKEN } from "../support/processes.js"
import { sdkServer } from "../support/sdkServer.js"

const service = sdkServer()
const server = { get baseUrl() { return service.current().baseUrl } }

const until = async <A>(read: () => Promise<A>, done: (a: A) => boolean, ms = 30_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${JSON.stringify(value)}`)
    await new Promise((r) => setTimeout(r, 150))
  }
}

describe("the SDK against the real service (issue 31)", () => {
  it("an agent written from the SDK's README registers, earns from paid calls and withdraws to its wallet", async () => {
    const ownerWallet = devAccount(4)
    // As in sdk/README.md "An agent that earns".
    const agent = createAgent({
      marketplaceUrl: server.baseUrl,
      name: "Summariser",
      description: "Summarises English text",
      tags: ["text", "summary"],
      capabilities: {
        summarize: {
          description: "Summarises a text in one sentence",
          price: "0.60",
          inputSchema: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
          outputSchema: { type: "object", required: ["summary"], properties: { summary: { type: "string" } } },
          handler: async (input: { text: string }) => ({ summary: input.text.split(". ")[0] ?? "" })
        }
      }
    })
    const http = createServer(agent.handler)
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
    try {
      const owner = agentOwner(agent, { wallet: ownerWallet })
      const walletBefore = await usdcBalance(ownerWallet.address)
      const { id } = await owner.register({ execution: `http://127.0.0.1:${(http.address() as AddressInfo).port}/` })
      expect(owner.agentId).toBe(id)

      // A client pays two calls with x402 v2: one synchronous, one async followed with wait().
      const market = marketplace({ baseUrl: server.baseUrl, wallet: devAccount(5), x402: "v2", maxPayment: "1.00" })
      const [found] = await market.discover({ capability: "summarize" })
      expect(found?.id).toBe(id)
      const first = await market.execute<{ summary: string }>(id, "summarize", { text: "Agents earn. Clients pay." })
      expect(first).toMatchObject({ status: "completed", output: { summary: "Agents earn" }, cost: { agentFee: "0.600000", platformFee: "0.001000" } })
      expect(first.paymentUsed).toBeDefined()
      const accepted = await market.execute(id, "summarize", { text: "Second call. Async." }, { async: true })
      const done = await market.wait<{ summary: string }>(accepted.requestId)
      expect(done).toMatchObject({ status: "completed", output: { summary: "Second call" } })

      // 85% of 0.60 twice, available once the 1-second devnet hold has passed.
      const balance = await until(() => owner.earnings(), (b) => b.available === "1.020000")
      expect(balance.totalEarned).toBe("1.020000")
      await expect(owner.withdraw("5.00")).rejects.toBeInstanceOf(ConflictError)
      const { withdrawalId, netAmount } = await owner.withdraw("1.00")
      expect(netAmount).toBe("0.900000")
      const paid = await owner.waitForWithdrawal(withdrawalId)
      expect(paid).toMatchObject({ status: "completed", tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
      expect(await usdcBalance(ownerWallet.address)).toBe(walletBefore - toMicro("0.10") + toMicro("0.90"))
      const transactions = await owner.history()
      expect(transactions.map((t) => [t.capability_id, t.agent_earnings])).toEqual([["summarize", "0.510000"], ["summarize", "0.510000"]])
      expect((await owner.earnings()).available).toBe("0.020000")
    } finally {
      http.closeAllConnections()
      http.close()
    }
  }, 90_000)

  it("metered capabilities declared with the SDK: a dynamic one's quote handler and reported usage set the charge, per-second time is measured, a per-token call without usage is logged; every result carries its transactionId for a dispute", async () => {
    const warnings: Array<string> = []
    const agent = createAgent({
      marketplaceUrl: server.baseUrl,
      name: "Metered",
      warn: (message) => warnings.push(message),
      capabilities: {
        render: {
          description: "Renders frames, priced by a quote",
          pricing: { model: "dynamic", maxPrice: "0.05", quote: (input: { frames: number }) => (input.frames * 0.01).toFixed(6) },
          handler: async (input: { frames: number }, ctx) => {
            ctx.reportUsage(15_000) // micro-USDC of agent fee, under the quote of 0.02
            return { frames: input.frames }
          }
        },
        timed: {
          description: "Takes its time, billed per started second",
          pricing: { model: "per-minute", price: "0.01", per: "second", maxDurationSeconds: 5 },
          handler: async () => ({ ok: true })
        },
        tokens: {
          description: "Forgets to report its tokens",
          pricing: { model: "per-token", pricePer1000Tokens: "0.002", maxTokens: 1_000 },
          handler: async () => ({ ok: true })
        }
      }
    })
    const http = createServer(agent.handler)
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
    try {
      const owner = agentOwner(agent, { wallet: devAccount(8) })
      const { id } = await owner.register({ execution: `http://127.0.0.1:${(http.address() as AddressInfo).port}/` })
      const market = marketplace({ baseUrl: server.baseUrl, wallet: devAccount(9), maxPayment: "1.00" })
      const payerBefore = await usdcBalance(devAccount(9).address)
      const registered = ((await (await fetch(`${server.baseUrl}/api/v1/agents/${id}`)).json()) as { data: { capabilities: Array<{ pricing: unknown }> } }).data
      expect(registered.capabilities.map((c) => c.pricing)).toEqual([
        expect.objectContaining({ model: "dynamic", maxPrice: "0.050000" }),
        expect.objectContaining({ model: "per-minute", per: "second", maxDurationSeconds: 5 }),
        expect.objectContaining({ model: "per-token", maxTokens: 1_000 })
      ])

      // The quote (0.02) caps the charge; the reported 0.015 is what is charged, with the platform's 0.001.
      const rendered = await market.execute<{ frames: number }>(id, "render", { frames: 2 })
      expect(rendered.output).toEqual({ frames: 2 })
      expect([rendered.charged, rendered.returned]).toEqual(["0.016000", "0.035000"])
      const timed = await market.execute(id, "timed", {})
      expect(toMicro(timed.charged ?? "") + toMicro(timed.returned ?? "")).toBe(51_000n) // 5 s at 0.01 + 0.001 authorised
      expect(toMicro(timed.charged ?? "")).toBeLessThanOrEqual(21_000n) // a quick answer: at most two started seconds
      const forgot = await market.execute(id, "tokens", {})
      expect(forgot.charged).toBe("0.001000")
      expect(warnings).toEqual([expect.stringMatching(/tokens is per-token but its handler reported no usage/)])

      for (const result of [rendered, timed, forgot]) expect(result.transactionId).toMatch(/^tx_/)
      const dispute = await market.dispute(rendered.transactionId ?? "", "overcharge", "the quote was too high")
      expect(dispute).toMatchObject({ transactionId: rendered.transactionId, status: "open" })
      // The payer's balance ends at exactly its charges once the remainders are back on chain.
      const charged = [rendered, timed, forgot].reduce((sum, r) => sum + toMicro(r.charged ?? ""), 0n)
      await until(() => usdcBalance(devAccount(9).address), (balance) => balance === payerBefore - charged)
    } finally {
      http.closeAllConnections()
      http.close()
    }
  }, 90_000)

  it("the demo's flow: the money table the service gives matches the chain, reconciliation at zero drift", async () => {
    const lines: Array<string> = []
    const result = await runDemo({
      baseUrl: server.baseUrl,
      rpcUrl: inject("rpcUrl"),
      operatorToken: PROCESS_OPERATOR_TOKEN,
      summariserOwner: devAccount(1),
      translatorOwner: devAccount(2),
      client: devAccount(3),
      holdSeconds: 1,
      log: (line) => lines.push(line)
    })
    expect(result.chainTotalCost).toBe("1.512000") // 1.50 + 0.001 at the root, 0.01 + 0.001 for the hop
    expect(result.rows.map((r) => [r.who, r.onChain])).toEqual([
      ["client", -1_512_000n],
      ["summariser's owner", -100_000n],
      ["translator's owner", 800_000n],
      ["treasury", 812_000n]
    ])
    for (const row of result.rows) expect(row.expected, row.who).toBe(row.onChain)
    expect(result.drift).toBe(0n)
    expect(result.earned).toEqual([["Summariser", "0.008500", "0.008500"], ["Translator", "1.275000", "0.275000"]])
    expect(result.webhookEvents).toEqual(expect.arrayContaining(["chain.started", "chain.completed", "execution.completed", "dispute.opened", "dispute.resolved", "withdrawal.completed"]))
    // In the order they happened: the chain starts before it completes, the dispute opens before it is resolved.
    const at = (event: string) => result.webhookEvents.indexOf(event)
    expect(at("chain.started")).toBeLessThan(at("chain.completed"))
    expect(at("dispute.opened")).toBeLessThan(at("dispute.resolved"))
    expect(at("dispute.resolved")).toBeLessThan(at("withdrawal.completed"))
    // The table explains itself: its rows sum to zero and the treasury is the platform's revenue plus what agents are owed.
    const table = moneyTable(result)
    expect(table.find((l) => l.startsWith("sum "))).toMatch(/\+?0\.000000 +\(zero: money only moved between these wallets\)/)
    expect(result.platformRevenue + result.owedToAgents).toBe(812_000n)
    expect(table.some((l) => l.includes("still owed to the agents' owners  ✓"))).toBe(true)
    expect(lines.some((l) => l.includes("holds are shortened on this devnet"))).toBe(true)
    expect(lines.some((l) => l.includes(`disputes the chained call it just paid`))).toBe(true)
    expect(lines.some((l) => l.includes("└─ summarize"))).toBe(true)
  }, 90_000)
})
