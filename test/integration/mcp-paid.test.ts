// The paid MCP tools end to end with the official SDK client (Client + StreamableHTTPClientTransport) paying with the
// official x402 v2 client (@x402/core x402Client + @x402/evm exact scheme) on the devnet, as x402's MCP transport says:
// a call without payment is isError with the PaymentRequired, the retry carries the payload in _meta["x402/payment"],
// the result carries the receipt in _meta["x402/payment-response"]; validation before payment, replays refused, a
// failed execution refunded, ledger equal to chain.
import { expect, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import { x402Client } from "@x402/core/client"
import { isPaymentRequiredV2 } from "@x402/core/schemas"
import { toClientEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { Effect, TestClock } from "effect"
import { getAddress } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { MachineHost } from "../../machines/Host.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, strangerAccount, TREASURY, usdcBalance } from "../support/clients.js"
import { registration, withWalletProof } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const FEE = 100_000n
const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice

type ToolResult = Awaited<ReturnType<Client["callTool"]>>

// #region docs:mcp-x402-payer
/** An x402 v2 payer for MCP tools: signs exact USDC payments from `account` on Base Sepolia (our devnet's chain id). */
const mcpPayer = (account: PrivateKeyAccount, usdcAddress: string) =>
  new x402Client()
    .register("eip155:84532", new ExactEvmScheme(toClientEvmSigner(account)))
    // The devnet's USDC is not one of x402's built-in assets: allow it by address, capped at 1 USDC a payment.
    .setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset: usdcAddress, maxAmountPerPayment: "1000000" }] })

/**
 * Calls a tool; if it answers with x402's PaymentRequired, pays and calls again with the same arguments.
 * Returns the paid result (receipt in `_meta["x402/payment-response"]`) and the payload that paid.
 */
const callPaidTool = async (client: Client, payer: x402Client, name: string, args: Record<string, unknown>) => {
  const first = await client.callTool({ name, arguments: args })
  if (!first.isError || !isPaymentRequiredV2(first.structuredContent)) return { result: first, payment: undefined }
  // A plain copy: x402's zod-inferred PaymentRequired and its client's parameter type differ only under TypeScript's
  // exactOptionalPropertyTypes (this project's setting); elsewhere pass first.structuredContent as it is.
  const payment = await payer.createPaymentPayload(JSON.parse(JSON.stringify(first.structuredContent)))
  const result = await client.callTool({ name, arguments: args, _meta: { "x402/payment": payment } })
  return { result, payment }
}
// #endregion

/** A connected MCP client, closed with the test's scope. */
const connect = Effect.flatMap(TestEnv, ({ baseUrl }) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      // #region docs:mcp-connect
      const client = new Client({ name: "my-assistant", version: "1.0.0" })
      const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`))
      await client.connect(transport)
      // #endregion
      return { client, transport }
    }),
    ({ client, transport }) => Effect.promise(async () => {
      await transport.terminateSession().catch(() => undefined)
      await client.close()
    })
  ))

const tool = (client: Client, name: string, args: Record<string, unknown>, meta?: Record<string, unknown>) =>
  Effect.promise(() => client.callTool({ name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) }))

/** The JSON in a tool result's first (text) content. */
const textOf = (result: ToolResult): any => {
  const first: unknown = Array.isArray(result.content) ? result.content[0] : undefined
  return JSON.parse(typeof first === "object" && first !== null && "text" in first ? String(first.text) : "null")
}

const structured = (result: ToolResult): Record<string, any> => result.structuredContent ?? {}

const usdc = () => getAddress(inject("usdcAddress"))
const balance = (account: PrivateKeyAccount) => Effect.promise(() => usdcBalance(account.address))
const TX_HASH = /^0x[0-9a-f]{64}$/

layer(TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "5000", EXECUTION_RETRY_WINDOW_SECONDS: "600" }), { timeout: 120_000 })("mcp paid tools", (it) => {
  /** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
  const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))
  const paymentsCount = Effect.flatMap(TestEnv, ({ sql }) => Effect.map(sql<{ n: string }>`SELECT count(*)::text AS n FROM payments`, (r) => Number(r[0]?.n)))

  it.scoped("tools/list shows register_agent and execute with their cost, not read-only, not idempotent, and an output schema admitting PaymentRequired", () =>
    Effect.gen(function* () {
      const { client } = yield* connect
      const { tools } = yield* Effect.promise(() => client.listTools())
      for (const [name, cost] of [["register_agent", "0.10 USDC"], ["execute", "0.001 USDC platform fee"]] as const) {
        const listed = tools.find((t) => t.name === name)
        expect(listed?.description, name).toContain(cost)
        expect(listed?.description, name).toContain("_meta[\"x402/payment\"]")
        expect(listed?.annotations, name).toMatchObject({ readOnlyHint: false, idempotentHint: false, destructiveHint: false })
        expect(listed?.outputSchema?.type, name).toBe("object")
        // anyOf: the tool's result, or x402's PaymentRequired (the structuredContent of its payment-required error result).
        const branches: Array<Record<string, any>> = Array.isArray(listed?.outputSchema?.anyOf) ? listed.outputSchema.anyOf : []
        expect(branches.some((b) => b.properties?.x402Version !== undefined && b.properties?.accepts !== undefined), name).toBe(true)
        expect(branches.length, name).toBeGreaterThanOrEqual(2)
        expect(JSON.stringify(listed), name).not.toContain("/schemas/")
      }
      expect(tools.find((t) => t.name === "execute")?.inputSchema).toMatchObject({
        required: expect.arrayContaining(["targetAgentId", "capabilityId", "input"]),
        properties: { async: { type: "boolean" } }
      })
    }))

  it.scoped("register_agent: no payment is isError with x402's PaymentRequired; paid, the agent is active and _meta carries the settlement", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const { client } = yield* connect
      const owner = devAccount(1)
      const args = registration(owner, { name: "MCP Registrant" })

      const unpaid = yield* tool(client, "register_agent", args)
      expect(unpaid.isError).toBe(true)
      expect(unpaid.structuredContent).toEqual({
        x402Version: 2,
        error: "payment_required",
        resource: { url: `${baseUrl}/mcp#register_agent`, description: "Agent registration fee (0.10 USDC)", mimeType: "application/json" },
        accepts: [{
          scheme: "exact",
          network: "eip155:84532",
          asset: usdc(),
          amount: "100000",
          payTo: TREASURY,
          maxTimeoutSeconds: expect.any(Number),
          extra: { name: "USDC", version: "2" }
        }]
      })
      expect(textOf(unpaid)).toEqual({ "x402/error": { code: 402, message: expect.stringMatching(/costs 0\.100000 USDC.*_meta\["x402\/payment"\]/), data: unpaid.structuredContent } })

      const payerBefore = yield* balance(owner)
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const { result, payment } = yield* Effect.promise(() => callPaidTool(client, mcpPayer(owner, usdc()), "register_agent", args))
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
      expect(payment).toBeDefined()
      const registered = structured(result)
      expect(registered).toMatchObject({ wallet: owner.address.toLowerCase(), name: "MCP Registrant", status: "active", registrationTxId: expect.stringMatching(TX_HASH) })
      expect(textOf(result)).toEqual(registered)
      expect(result._meta?.["x402/payment-response"]).toEqual({
        success: true,
        transaction: registered.registrationTxId,
        network: "eip155:84532",
        payer: owner.address.toLowerCase()
      })
      expect(yield* balance(owner)).toBe(payerBefore - FEE)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore + FEE)
      const stored = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${registered.id}`))
      expect(stored.body.data).toMatchObject({ id: registered.id, name: "MCP Registrant", status: "active" })

      // The same payment again, for another wallet: refused as already used, with the challenge; nothing charged.
      const rowsBefore = yield* paymentsCount
      const replay = yield* tool(client, "register_agent", registration(devAccount(2)), { "x402/payment": payment })
      expect(replay.isError).toBe(true)
      expect(replay.structuredContent).toMatchObject({ x402Version: 2, error: "payment_already_used", accepts: [{ amount: "100000" }] })
      expect(yield* paymentsCount).toBe(rowsBefore)
      expect(yield* balance(owner)).toBe(payerBefore - FEE)
      const wallet2 = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/check-wallet/${devAccount(2).address}`))
      expect(wallet2.body.data).toEqual({ exists: false })

      // The same payment with the same arguments (a lost answer, sent again): the agent it registered, charged once.
      const resent = yield* tool(client, "register_agent", args, { "x402/payment": payment })
      expect(resent.isError ?? false, JSON.stringify(resent.content)).toBe(false)
      expect(structured(resent)).toEqual(registered)
      expect(resent._meta?.["x402/payment-response"]).toEqual(result._meta?.["x402/payment-response"])
      expect(yield* paymentsCount).toBe(rowsBefore)
      expect(yield* balance(owner)).toBe(payerBefore - FEE)
    }))

  it.scoped("register_agent paid by another wallet: refused (WALLET_NOT_CONTROLLED, nothing charged) unless the arguments carry the agent wallet's walletProof", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const { client } = yield* connect
      const owner = strangerAccount()
      const payer = devAccount(6)
      const before = yield* balance(payer)
      const rowsBefore = yield* paymentsCount
      const { result: refused } = yield* Effect.promise(() => callPaidTool(client, mcpPayer(payer, usdc()), "register_agent", registration(owner)))
      expect(refused.isError).toBe(true)
      expect(textOf(refused)).toMatchObject({ success: false, error: { code: "WALLET_NOT_CONTROLLED", details: { wallet: owner.address.toLowerCase(), payer: payer.address.toLowerCase() } } })
      expect(yield* balance(payer)).toBe(before)
      expect(yield* paymentsCount).toBe(rowsBefore)

      const signed = yield* Effect.promise(() => withWalletProof(owner, registration(owner, { name: "Sponsored over MCP" })))
      const { result } = yield* Effect.promise(() => callPaidTool(client, mcpPayer(payer, usdc()), "register_agent", signed))
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
      expect(structured(result)).toMatchObject({ wallet: owner.address.toLowerCase(), name: "Sponsored over MCP", status: "active" })
      expect(yield* balance(payer)).toBe(before - FEE)
      const wallet = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/check-wallet/${owner.address}`))
      expect(wallet.body.data).toEqual({ exists: true, agentId: structured(result).id })

      // A proof over other arguments (the endpoint changed after signing) is refused before the payment is asked for.
      const tampered = { ...signed, endpoints: { execution: "http://127.0.0.1:9/elsewhere" } }
      const bad = yield* tool(client, "register_agent", tampered)
      expect(textOf(bad)).toMatchObject({ error: { code: "WALLET_PROOF_INVALID" } })
    }))

  it.scoped("register_agent validates before payment: bad arguments are a protocol error, an invalid or duplicate registration a tool error, nothing charged", () =>
    Effect.gen(function* () {
      yield* realNow
      const { client } = yield* connect
      const owner = devAccount(3)
      const { wallet: _, ...withoutWallet } = registration(owner)
      const bad = yield* Effect.promise(() => client.callTool({ name: "register_agent", arguments: withoutWallet }).then(() => undefined, (e: unknown) => e))
      expect(bad).toBeInstanceOf(McpError)
      expect(bad).toMatchObject({ code: -32602, message: expect.stringContaining("wallet") })

      const before = yield* balance(owner)
      const rowsBefore = yield* paymentsCount
      // A registration the service refuses (a capability whose inputSchema is no JSON Schema): VALIDATION_ERROR, paid or not.
      const invalid = registration(owner, { capabilities: [echoCapability({ inputSchema: { type: "nonsense" } })] })
      const unpaid = yield* tool(client, "register_agent", invalid)
      expect(unpaid.isError).toBe(true)
      expect(unpaid.structuredContent).toBeUndefined()
      expect(textOf(unpaid), JSON.stringify(textOf(unpaid))).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR", details: { issues: expect.arrayContaining([expect.objectContaining({ path: "capabilities.0.inputSchema.type" })]) } } })
      const { result: paidInvalid } = yield* Effect.promise(() => callPaidTool(client, mcpPayer(owner, usdc()), "register_agent", invalid))
      expect(textOf(paidInvalid)).toMatchObject({ error: { code: "VALIDATION_ERROR" } })
      // A wallet that already has an agent (devAccount(1), registered above over MCP): a conflict, not a charge.
      const { result: duplicate } = yield* Effect.promise(() => callPaidTool(client, mcpPayer(owner, usdc()), "register_agent", registration(devAccount(1))))
      expect(textOf(duplicate)).toMatchObject({ error: { code: "WALLET_ALREADY_REGISTERED" } })
      expect(yield* balance(owner)).toBe(before)
      expect(yield* paymentsCount).toBe(rowsBefore)
    }))

  it.scoped("execute: paid in _meta, the agent answers, _meta carries the settlement, paymentUsed reads the output back over MCP and HTTP; the same payment re-sent answers the result, for other input it is refused", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(4), agent.url, { tier: "premium" })
      const { client } = yield* connect
      const payer = devAccount(5)
      const args = { targetAgentId: agentId, capabilityId: "echo", input: { text: "over mcp" } }

      const unpaid = yield* tool(client, "execute", args)
      expect(unpaid.isError).toBe(true)
      expect(unpaid.structuredContent).toMatchObject({
        x402Version: 2,
        error: "payment_required",
        // `exact`, then a payment channel (x402 batch-settlement) for the same price.
        accepts: [
          { scheme: "exact", network: "eip155:84532", amount: "11000", payTo: TREASURY },
          { scheme: "batch-settlement", network: "eip155:84532", amount: "11000", payTo: TREASURY, extra: { receiverAuthorizer: TREASURY } }
        ],
        extensions: { "payment-identifier": { info: { required: false } } }
      })
      expect(agent.calls).toHaveLength(0)

      const before = yield* balance(payer)
      const { result, payment } = yield* Effect.promise(() => callPaidTool(client, mcpPayer(payer, usdc()), "execute", args))
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
      const done = structured(result)
      expect(done).toMatchObject({ status: "completed", output: { echo: { text: "over mcp" } }, cost: { total: "0.011000" }, settlement: { status: "settled" } })
      expect(done.paymentUsed).toBe(Buffer.from(JSON.stringify(payment)).toString("base64"))
      expect(result._meta?.["x402/payment-response"]).toEqual({
        success: true,
        transaction: done.settlement.txHash,
        network: "eip155:84532",
        payer: payer.address.toLowerCase(),
        // The service's signed receipt of the call (test/integration/receipts.test.ts checks it).
        extensions: { receipt: expect.objectContaining({ requestId: done.requestId, charged: "11000", transaction: done.settlement.txHash }) }
      })
      expect(done.settlement.txHash).toMatch(TX_HASH)
      expect(yield* balance(payer)).toBe(before - PRICE)
      expect(agent.calls).toHaveLength(1)

      const status = structured(yield* tool(client, "get_execution_status", { requestId: done.requestId, payment: done.paymentUsed }))
      expect(status).toMatchObject({ status: "completed", output: { echo: { text: "over mcp" } }, cost: { total: "0.011000" } })
      const http = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${done.requestId}`, { headers: { "PAYMENT-SIGNATURE": done.paymentUsed } }))
      expect(http.body.data).toMatchObject({ output: { echo: { text: "over mcp" } } })

      const rowsBefore = yield* paymentsCount
      // The same payment and arguments again (a lost answer): the result, not a second charge.
      const resent = yield* tool(client, "execute", args, { "x402/payment": payment })
      expect(resent.isError ?? false, JSON.stringify(resent.content)).toBe(false)
      expect(structured(resent)).toMatchObject({ requestId: done.requestId, status: "completed", output: { echo: { text: "over mcp" } }, paymentUsed: done.paymentUsed })
      // The same payment for other input: refused as used, nothing charged.
      const replay = yield* tool(client, "execute", { ...args, input: { text: "free ride" } }, { "x402/payment": payment })
      expect(replay.isError).toBe(true)
      expect(replay.structuredContent).toMatchObject({ x402Version: 2, error: "payment_already_used" })
      expect(yield* paymentsCount).toBe(rowsBefore)
      expect(yield* balance(payer)).toBe(before - PRICE)
      expect(agent.calls).toHaveLength(1)
    }))

  it.scoped("execute with async answers pending with the requestId at once; get_execution_status with paymentUsed then shows the output", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(6), agent.url, { tier: "premium" })
      const { client } = yield* connect
      const payer = devAccount(7)
      const before = yield* balance(payer)
      const { result } = yield* Effect.promise(() =>
        callPaidTool(client, mcpPayer(payer, usdc()), "execute", { targetAgentId: agentId, capabilityId: "echo", input: { text: "later" }, async: true }))
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
      const accepted = structured(result)
      expect(accepted).toEqual({
        jobId: accepted.requestId,
        requestId: expect.stringMatching(/^job_/),
        status: "pending",
        statusUrl: expect.stringContaining(`/api/v1/execute/${accepted.requestId}`),
        paymentUsed: expect.any(String)
      })
      // The settlement is not confirmed when an async call is answered: no receipt yet (docs/mcp.md).
      expect(result._meta?.["x402/payment-response"]).toBeUndefined()
      // The work runs on in the background (real I/O with the agent and the chain): poll, bounded.
      let status: Record<string, any> = {}
      for (let i = 0; i < 200 && status.status !== "completed"; i++) {
        status = structured(yield* tool(client, "get_execution_status", { requestId: accepted.requestId, payment: accepted.paymentUsed }))
        if (status.status !== "completed") yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
      }
      expect(status).toMatchObject({ status: "completed", output: { echo: { text: "later" } }, settlement: { status: "settled", txHash: expect.stringMatching(TX_HASH) } })
      expect(yield* balance(payer)).toBe(before - PRICE)
    }))

  it.scoped("execute whose agent fails: EXECUTION_FAILED with the retry window and the receipt; not retried, it is refunded on chain as on HTTP", () =>
    Effect.gen(function* () {
      yield* realNow
      const machines = yield* MachineHost
      const refunds = yield* TreasuryWorker
      const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "nope" } })
      const agentId = yield* registerAgent(devAccount(8), agent.url, { tier: "premium" })
      const { client } = yield* connect
      const payer = devAccount(9)
      const before = yield* balance(payer)
      const { result } = yield* Effect.promise(() =>
        callPaidTool(client, mcpPayer(payer, usdc()), "execute", { targetAgentId: agentId, capabilityId: "echo", input: { text: "x" } }))
      expect(result.isError).toBe(true)
      expect(result.structuredContent).toBeUndefined()
      const failed = textOf(result)
      expect(failed).toMatchObject({
        success: false,
        error: { code: "EXECUTION_FAILED", details: { status: "failed", retryUntil: expect.any(String), paymentUsed: expect.any(String), settlement: { status: "settled" } } }
      })
      const { requestId, paymentUsed } = failed.error.details
      expect(result._meta?.["x402/payment-response"]).toMatchObject({ success: true, transaction: failed.error.details.settlement.txHash })
      expect(yield* balance(payer)).toBe(before - PRICE)

      // The retry window (600 s) closes: the payment is refunded on chain.
      yield* TestClock.adjust(601_000)
      yield* machines.fireDue
      yield* refunds.processDue
      const status = structured(yield* tool(client, "get_execution_status", { requestId, payment: paymentUsed }))
      expect(status).toMatchObject({ status: "refunded", refund: { status: "confirmed", txHash: expect.stringMatching(TX_HASH) } })
      expect(yield* balance(payer)).toBe(before)
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
