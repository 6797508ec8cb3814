// Issue 25, point 3: a client that lost the answer sends the identical request again with the very same payment
// header (x402 v1 X-PAYMENT here; v2 PAYMENT-SIGNATURE in x402-v2.test.ts, MCP in mcp-paid.test.ts) and gets the
// result or the current status, charged once; the same header with another body or idempotency key is still refused.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, devAccount, signPayment, strangerAccount, TREASURY, usdcBalance } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { registration, withWalletProof } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice
const FEE = 100_000n

layer(TestApp({ EXECUTION_TIMEOUT_MS: "1500", EXECUTION_RETRY_WINDOW_SECONDS: "600" }), { excludeTestServices: true })("re-sent payments", (it) => {
  const post = (path: string, json: unknown, header: string) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) =>
      Effect.promise(() => call(`${baseUrl}${path}`, { method: "POST", json, headers: { "X-PAYMENT": header } })))

  const paymentsOf = (payer: string) =>
    Effect.flatMap(TestEnv, ({ sql }) =>
      Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM payments WHERE payer = ${payer.toLowerCase()}`, (r) => r[0]?.n ?? 0))

  it.scoped("an execution re-sent with the same X-PAYMENT and body answers the cached result; the payer is charged once and the agent called once", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payer = devAccount(2)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const { header } = yield* Effect.promise(() => signPayment({ account: payer, value: PRICE }))
      const body = { targetAgentId: agentId, capabilityId: "echo", input: { text: "lost answer" } }
      const first = yield* post("/api/v1/execute", body, header)
      expect(first.status).toBe(200)
      const again = yield* post("/api/v1/execute", body, header)
      expect(again.status).toBe(200)
      expect(again.body.data).toEqual(first.body.data)
      expect(again.body.data).toMatchObject({ status: "completed", output: { echo: { text: "lost answer" } }, settlement: { status: "settled" } })
      expect(again.headers.get("x-payment-used")).toBe(header)
      expect(again.headers.get("x-payment-response")).toBe(first.headers.get("x-payment-response"))
      expect(again.headers.get("x-client-id")).toBe(first.headers.get("x-client-id"))
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
      expect(yield* paymentsOf(payer.address)).toBe(1)
      expect(agent.calls).toHaveLength(1)
    }))

  it.scoped("the same X-PAYMENT with another input or another idempotencyKey is refused (402 payment_already_used), charges nothing and reveals nothing", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), agent.url, { tier: "premium" })
      const payer = devAccount(4)
      const { header } = yield* Effect.promise(() => signPayment({ account: payer, value: PRICE }))
      const body = { targetAgentId: agentId, capabilityId: "echo", input: { text: "mine" }, idempotencyKey: "order-0001" }
      const first = yield* post("/api/v1/execute", body, header)
      expect(first.status).toBe(200)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const attempts = [
        { ...body, input: { text: "someone else's input" } },
        { ...body, idempotencyKey: "order-0002" },
        { targetAgentId: agentId, capabilityId: "echo", input: { text: "mine" } }
      ]
      for (const attempt of attempts) {
        const refused = yield* post("/api/v1/execute", attempt, header)
        expect(refused.status).toBe(402)
        expect(refused.body.error?.details.reason).toBe("payment_already_used")
        expect(JSON.stringify(refused.body)).not.toContain(first.body.data.requestId)
        expect(JSON.stringify(refused.body)).not.toContain("mine")
      }
      // The identical request (same key) is the purchase it paid for.
      const again = yield* post("/api/v1/execute", body, header)
      expect(again.status).toBe(200)
      expect(again.body.data.requestId).toBe(first.body.data.requestId)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore)
      expect(yield* paymentsOf(payer.address)).toBe(1)
      expect(agent.calls).toHaveLength(1)
    }))

  it.scoped("an async execution re-sent while it runs answers 202 with the same jobId; a failed one answers its 502 again; neither is charged twice", () =>
    Effect.gen(function* () {
      const slow = yield* fakeAgent({ kind: "delay", ms: 1000, then: "echo" })
      const slowId = yield* registerAgent(devAccount(5), slow.url, { tier: "premium" })
      const payer = devAccount(6)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const asyncPayment = yield* Effect.promise(() => signPayment({ account: payer, value: PRICE }))
      const body = { targetAgentId: slowId, capabilityId: "echo", input: { text: "later" } }
      const accepted = yield* post("/api/v1/execute?async=true", body, asyncPayment.header)
      expect(accepted.status).toBe(202)
      yield* Effect.promise(() => slow.waitForCall(0))
      const again = yield* post("/api/v1/execute?async=true", body, asyncPayment.header)
      expect(again.status).toBe(202)
      expect(again.body.data).toEqual(accepted.body.data)

      const failing = yield* fakeAgent({ kind: "json", status: 500, body: { error: "down" } })
      const failingId = yield* registerAgent(devAccount(7), failing.url, { tier: "premium" })
      const failedPayment = yield* Effect.promise(() => signPayment({ account: payer, value: PRICE }))
      const failedBody = { targetAgentId: failingId, capabilityId: "echo", input: { text: "fails" } }
      const failed = yield* post("/api/v1/execute", failedBody, failedPayment.header)
      expect(failed.status).toBe(502)
      const failedAgain = yield* post("/api/v1/execute", failedBody, failedPayment.header)
      expect(failedAgain.status).toBe(502)
      expect(failedAgain.body.error).toMatchObject({ code: "EXECUTION_FAILED", details: { requestId: failed.body.error?.details.requestId, status: "failed" } })
      expect(failing.calls).toHaveLength(1)
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(2n * PRICE)
      expect(yield* paymentsOf(payer.address)).toBe(2)
    }))

  it.scoped("the same X-PAYMENT sent twice at once for the same request is charged once; both answers name the one execution", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(8), agent.url, { tier: "premium" })
      const payer = devAccount(9)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const { header } = yield* Effect.promise(() => signPayment({ account: payer, value: PRICE }))
      const body = { targetAgentId: agentId, capabilityId: "echo", input: { text: "twice" } }
      const answers = yield* Effect.all([post("/api/v1/execute", body, header), post("/api/v1/execute", body, header)], { concurrency: 2 })
      for (const answer of answers) {
        expect(answer.status).toBe(200)
        expect(["pending", "completed"]).toContain(answer.body.data.status)
      }
      expect(answers[0].body.data.requestId).toBe(answers[1].body.data.requestId)
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
      expect(yield* paymentsOf(payer.address)).toBe(1)
      expect(agent.calls).toHaveLength(1)
    }))

  it.effect("a registration re-sent with the same X-PAYMENT and body answers the agent it registered (201), charged once; another body with that header is refused", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const owner = strangerAccount()
      const stranger = strangerAccount()
      const payer = devAccount(2)
      const body = yield* Effect.promise(() => withWalletProof(owner, registration(owner, { name: "Resent" })))
      const { header } = yield* Effect.promise(() => signPayment({ account: payer, value: FEE }))
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const first = yield* post("/api/v1/agents", body, header)
      expect(first.status).toBe(201)
      const again = yield* post("/api/v1/agents", body, header)
      expect(again.status).toBe(201)
      expect(again.body.data).toEqual(first.body.data)
      expect(again.headers.get("x-payment-response")).toBe(first.headers.get("x-payment-response"))
      const other = yield* post("/api/v1/agents", yield* Effect.promise(() => withWalletProof(stranger, registration(stranger))), header)
      expect(other.status).toBe(402)
      expect(other.body.error?.details.reason).toBe("payment_already_used")
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(FEE)
      expect(yield* sql`SELECT 1 FROM agents WHERE wallet = ${stranger.address.toLowerCase()}`).toHaveLength(0)
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
