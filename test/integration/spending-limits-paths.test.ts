// Spending limits on every way a call is paid: an MCP paid tool and a chain's root are refused like an HTTP execute (one
// check, in the reservation statement), and a refunded call gives its amount back to the day it was counted in.
import { expect, layer } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { x402Client } from "@x402/core/client"
import { isPaymentRequiredV2 } from "@x402/core/schemas"
import { toClientEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { Effect, TestClock } from "effect"
import { getAddress, type Hex, parseSignature } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { MachineHost } from "../../machines/Host.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, signPayment, usdcBalance, walletAuth, walletFor } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { mcpSession } from "../support/mcp.js"
import { setLimits } from "../support/limits.js"
import { echoCapability, execute, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n

const mcpPayer = (account: PrivateKeyAccount) =>
  new x402Client()
    .register("eip155:84532", new ExactEvmScheme(toClientEvmSigner(account)))
    .setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset: getAddress(inject("usdcAddress")), maxAmountPerPayment: "1000000" }] })

/** Calls a tool; on x402's PaymentRequired pays and calls again (as in mcp-paid.test.ts). */
const callPaidTool = async (client: Client, payer: x402Client, name: string, args: Record<string, unknown>) => {
  const first = await client.callTool({ name, arguments: args })
  if (!first.isError || !isPaymentRequiredV2(first.structuredContent)) return first
  const payment = await payer.createPaymentPayload(JSON.parse(JSON.stringify(first.structuredContent)))
  return client.callTool({ name, arguments: args, _meta: { "x402/payment": payment } })
}

const connect = mcpSession("limits-test")

const balance = (account: PrivateKeyAccount) => Effect.promise(() => usdcBalance(account.address))
const echo = (targetAgentId: string, text: string) => ({ targetAgentId, capabilityId: "echo", input: { text } })

/** What the payer's counters hold (the day's total, whatever the day). */
const spentTotal = (payer: PrivateKeyAccount) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    Effect.map(
      sql<{ spent: string }>`SELECT COALESCE(SUM(spent), 0)::text AS spent FROM payer_spending WHERE payer = ${payer.address.toLowerCase()} AND agent_id = ''`,
      (rows) => BigInt(rows[0]?.spent ?? "0")
    ))

layer(TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "5000", EXECUTION_RETRY_WINDOW_SECONDS: "600" }), { timeout: 120_000 })("spending limits on every paid path", (it) => {
  /** Our clock starts at the real time (payments and signatures are made against it), then only the test moves it. */
  const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

  it.scoped("an MCP paid execute outside the allow-list is refused with x402's PaymentRequired naming the limit; nothing charged", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payer = devAccount(6)
      expect((yield* setLimits(payer, { allowedAgents: ["00000000-0000-4000-8000-000000000000"] })).status).toBe(200)
      const before = yield* balance(payer)
      const { client } = yield* connect
      const result = yield* Effect.promise(() => callPaidTool(client, mcpPayer(payer), "execute", echo(agentId, "no")))
      expect(result.isError).toBe(true)
      expect(isPaymentRequiredV2(result.structuredContent)).toBe(true)
      expect(result.structuredContent).toMatchObject({ error: "spending_limit_exceeded" })
      expect(agent.calls).toHaveLength(0)
      expect(yield* balance(payer)).toBe(before)
    }))

  it.scoped("a chain's root pays its whole budget: a budget above the per-call limit is refused before anything is reserved", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(2)
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(owner, agent.url, { tier: "premium" })
      const patched = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/agents/${agentId}`, {
          method: "PATCH",
          headers: await walletAuth(owner, agentId),
          json: { capabilities: [echoCapability()], chainSettings: { chain_enabled: true, chain_max_depth: 3, chain_allowed_callers: [], chain_blocked_callers: [] } }
        }))
      expect(patched.status).toBe(200)
      const payer = devAccount(7)
      expect((yield* setLimits(payer, { perCallMax: 20_000n })).status).toBe(200)
      const before = yield* balance(payer)
      const refused = yield* Effect.promise(() =>
        paidCall(payer, `${baseUrl}/api/v1/execute`, { json: echo(agentId, "root"), headers: { "X-Chain-Budget": "0.05" } }))
      expect(refused.status).toBe(402)
      expect(refused.body.error?.details).toMatchObject({ reason: "spending_limit_exceeded", limit: "perCallMax", max: "0.020000", amount: "0.050000" })
      expect(agent.calls).toHaveLength(0)
      expect(yield* balance(payer)).toBe(before)
      const { sql } = yield* TestEnv
      expect(yield* sql`SELECT id FROM chains`).toEqual([])
    }))

  it.scoped("a refunded call no longer counts: the daily allowance comes back when the refund is booked", () =>
    Effect.gen(function* () {
      yield* realNow
      const machines = yield* MachineHost
      const failing = yield* fakeAgent({ kind: "json", status: 500, body: { error: "nope" } })
      const agentId = yield* registerAgent(devAccount(3), failing.url, { tier: "premium" })
      const payer = devAccount(8)
      expect((yield* setLimits(payer, { perDayMax: PRICE })).status).toBe(200)

      const failed = yield* execute(payer, echo(agentId, "one"))
      expect(failed.body.data?.status ?? failed.body.error?.details?.status).toBe("failed")
      expect(yield* spentTotal(payer)).toBe(PRICE)
      // The day's allowance is used up while the failed call may still be retried (it is paid for).
      const second = yield* execute(payer, echo(agentId, "two"))
      expect(second.status).toBe(402)
      expect(second.body.error?.details).toMatchObject({ reason: "spending_limit_exceeded", limit: "perDayMax", spent: "0.011000" })

      // The retry window closes: the payment is refunded, and the refund gives the allowance back (once).
      yield* TestClock.adjust(601_000)
      yield* machines.fireDue
      expect(yield* spentTotal(payer)).toBe(0n)
      yield* machines.fireDue
      expect(yield* spentTotal(payer)).toBe(0n)
      const { sql } = yield* TestEnv
      expect(yield* sql`SELECT source, amount::text AS amount FROM limit_restorations`).toEqual([{ source: expect.stringMatching(/^execution:req_/), amount: "11000" }])
    }))
})

/** The payer whose funds leave between our verification and our settlement, and where they go (and come back from). */
const DRAINED = devAccount(4)
const SINK = devAccount(9)

/** Moves all of DRAINED's USDC to SINK with DRAINED's own EIP-3009 authorization, submitted by SINK (who has gas). */
const drain = async () => {
  const value = await usdcBalance(DRAINED.address)
  const { header } = await signPayment({ account: DRAINED, value, to: SINK.address })
  const { payload } = JSON.parse(Buffer.from(header, "base64").toString("utf8")) as {
    payload: { signature: Hex; authorization: { validAfter: string; validBefore: string; nonce: Hex } }
  }
  const { r, s, v } = parseSignature(payload.signature)
  const wallet = walletFor(SINK)
  const a = payload.authorization
  const hash = await wallet.writeContract({
    address: getAddress(inject("usdcAddress")),
    abi: usdcAbi,
    functionName: "transferWithAuthorization",
    args: [DRAINED.address, SINK.address, value, BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, Number(v), r, s]
  })
  await wallet.waitForTransactionReceipt({ hash })
  return value
}

const giveBack = async (value: bigint) => {
  const wallet = walletFor(SINK)
  const hash = await wallet.writeContract({ address: getAddress(inject("usdcAddress")), abi: usdcAbi, functionName: "transfer", args: [DRAINED.address, value] })
  await wallet.waitForTransactionReceipt({ hash })
}

const drained: { value: bigint } = { value: 0n }

layer(
  // A payer short of the amount fails for good only once its authorization expired unused (docs/settlement.md, "Looking
  // a payment up"): payments here are valid for 10 s, so that comes within the test.
  TestApp({ PAYMENT_TIMEOUT_SECONDS: "10" }, {
    faults: {
      beforeSettle: (p) =>
        p.payer.toLowerCase() === DRAINED.address.toLowerCase() && drained.value === 0n
          ? Effect.promise(async () => {
            drained.value = await drain()
          })
          : Effect.void
    }
  }),
  { excludeTestServices: true, timeout: 120_000 }
)("spending limits when a settlement fails", (it) => {
  it.scoped("a payment whose settlement fails for good (the payer's funds left) no longer counts", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      expect((yield* setLimits(DRAINED, { perDayMax: 10n * PRICE })).status).toBe(200)
      yield* Effect.addFinalizer(() => Effect.promise(() => (drained.value > 0n ? giveBack(drained.value) : Promise.resolve())))
      yield* execute(DRAINED, echo(agentId, "unpaid"))
      expect(drained.value).toBeGreaterThan(0n)
      const { sql } = yield* TestEnv
      // The settlement's final failure is recorded once the authorization expired (by the recovery worker: polled, bounded).
      let failed = false
      for (let i = 0; i < 2_400 && !failed; i++) {
        const rows = yield* sql<{ status: string }>`SELECT status FROM payments WHERE lower(payer) = ${DRAINED.address.toLowerCase()}`
        failed = rows[0]?.status === "failed"
        if (!failed) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
      }
      expect(failed).toBe(true)
      expect(yield* spentTotal(DRAINED)).toBe(0n)
      expect(yield* sql`SELECT source, amount::text AS amount FROM limit_restorations`).toEqual([{ source: "settlement_failed", amount: String(PRICE) }])
    }))
})
