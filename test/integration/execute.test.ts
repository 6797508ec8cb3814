import { expect, layer } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { createHmac, createHash, createPublicKey, verify } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { authorizationUsed, call, devAccount, signPayment, TREASURY, usdcBalance } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, execute, registerAgent, ledgerMatchesChain } from "../support/scenario.js"
import { foldOutcomes } from "../support/reputation.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice

/** Polls until `check` passes (async results arrive from a background fiber). */
const eventually = <A>(effect: Effect.Effect<A>, check: (a: A) => boolean) =>
  effect.pipe(
    Effect.filterOrFail(check, () => "not yet" as const),
    Effect.retry(Schedule.spaced("25 millis").pipe(Schedule.intersect(Schedule.recurs(200)))),
    Effect.orDie
  )

layer(TestApp({ EXECUTION_TIMEOUT_MS: "1500", EXECUTION_RETRY_WINDOW_SECONDS: "600" }), { excludeTestServices: true })("paid execution", (it) => {
  it.scoped("a paid call reaches the agent, settles on chain and splits the money 0.001 + 15% / 85% to an instant agent", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payer = devAccount(2)
      const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const response = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "hello" } })
      expect(response.status).toBe(200)
      expect(response.body.data).toMatchObject({
        status: "completed",
        output: { echo: { text: "hello" } },
        cost: { agentFee: "0.010000", platformFee: "0.001000", total: "0.011000" },
        settlement: { status: "settled" }
      })
      expect(response.body.data.requestId).toMatch(/^req_/)
      expect(response.headers.get("x-payment-used")).toBeTruthy()
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - PRICE)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore + PRICE)
      const balance = yield* balanceOf(agentId)
      expect(balance.body.data).toMatchObject({
        available: "0.008500",
        pending: "0.000000",
        totalEarned: "0.008500",
        executionCount: 1,
        escrow: { pendingCount: 0, pendingTotal: "0.000000" }
      })
      const [row] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${response.body.data.requestId}`
      const { baseUrl } = yield* TestEnv
      const tx = yield* Effect.promise(() => call(`${baseUrl}/api/v1/payments/tx/${row!.transactionId}`))
      expect(tx.body.data).toMatchObject({
        amount: "0.011000",
        platform_fee: "0.001000",
        platformCut: "0.001500",
        platform_revenue: "0.002500",
        agent_earnings: "0.008500",
        status: "completed",
        escrow_status: "released",
        providing_agent: agentId,
        settlement: { status: "settled" }
      })
      expect(yield* sql`SELECT * FROM ledger_unbalanced_transfers`).toEqual([])
      // The dead-attempt deadline was dropped when the attempt finished: nothing is left to fire later.
      expect(yield* sql`SELECT 1 FROM machine_timers WHERE actor_id = ${response.body.data.requestId} AND fired_at IS NULL`).toEqual([])
      // Reputation +1 and a healthy EMA after one success (once the outcome is folded); one event row.
      yield* foldOutcomes
      const [scores] = yield* sql<{ reputationScore: number }>`SELECT reputation_score FROM agents WHERE id = ${agentId}`
      expect(scores?.reputationScore).toBe(51)
      // The read cache follows the new score at once (the fold drops the cached agent, here and, by notification, everywhere).
      const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${agentId}`))
      expect(read.body.data).toMatchObject({ reputation_score: 51, health_score: 1 })
      const events = yield* sql<{ eventType: string; scoreDelta: number }>`SELECT event_type, score_delta FROM reputation_events WHERE agent_id = ${agentId}`
      expect(events).toEqual([{ eventType: "transaction_success", scoreDelta: 1 }])
      const outbox = yield* sql<{ eventType: string }>`SELECT event_type FROM outbox_events WHERE agent_id = ${agentId} ORDER BY seq`
      expect(outbox.map((e) => e.eventType)).toEqual(expect.arrayContaining(["payment.received", "execution.completed", "escrow.released"]))
    }))

  it.scoped("the agent receives the documented request and can verify it came from us", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), agent.url, { tier: "premium" })
      const response = yield* execute(devAccount(2), { targetAgentId: agentId, capabilityId: "echo", input: { text: "sign me" } })
      expect(response.status).toBe(200)
      const received = agent.calls[0]!
      expect(received.method).toBe("POST")
      expect(received.body).toEqual({ requestId: response.body.data.requestId, capabilityId: "echo", input: { text: "sign me" } })
      expect(received.headers["x-request-id"]).toBe(response.body.data.requestId)
      expect(received.headers["traceparent"]).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
      const key = yield* Effect.promise(() => call(`${baseUrl}/api/v1/platform/signing-key`))
      const timestamp = String(received.headers["x-marketplace-timestamp"])
      const signature = String(received.headers["x-marketplace-signature"]).replace(/^ed25519=/, "")
      const message = Buffer.from(`${timestamp}.${response.body.data.requestId}.${received.rawBody}`)
      expect(verify(null, message, createPublicKey(key.body.data.publicKeyPem), Buffer.from(signature, "base64"))).toBe(true)
      expect(received.headers["x-marketplace-key-id"]).toBe(key.body.data.keyId)
    }))

  it.scoped("every check before payment refuses without charging, even with a valid payment header", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(4), agent.url, { tier: "premium" })
      const payer = devAccount(5)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const cases: ReadonlyArray<readonly [Record<string, unknown>, number, string]> = [
        [{ targetAgentId: "00000000-0000-4000-8000-000000000000", capabilityId: "echo", input: { text: "x" } }, 404, "AGENT_NOT_FOUND"],
        [{ targetAgentId: agentId, capabilityId: "nope", input: { text: "x" } }, 404, "CAPABILITY_NOT_FOUND"],
        [{ targetAgentId: agentId, capabilityId: "echo", input: { text: 42 } }, 400, "VALIDATION_ERROR"],
        [{ targetAgentId: agentId, capabilityId: "echo", input: {} }, 400, "VALIDATION_ERROR"],
        [{ targetAgentId: agentId, capabilityId: "echo", input: { text: "nul\u0000" } }, 400, "VALIDATION_ERROR"],
        [{ targetAgentId: agentId, capabilityId: "echo", input: "not an object" }, 400, "VALIDATION_ERROR"],
        [{ targetAgentId: "not-a-uuid", capabilityId: "echo", input: { text: "x" } }, 400, "VALIDATION_ERROR"]
      ]
      for (const [body, status, code] of cases) {
        const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: PRICE }))
        const response = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute`, { method: "POST", json: body, headers: { "X-PAYMENT": header } }))
        expect({ status: response.status, code: response.body.error?.code }).toEqual({ status, code })
        expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
      }
      const invalid = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text: 42 } } }))
      expect(invalid.body.error?.details.issues).toEqual([expect.objectContaining({ path: "input.text" })])
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect(agent.calls).toHaveLength(0)
      expect(yield* sql`SELECT 1 FROM executions WHERE agent_id = ${agentId}`).toHaveLength(0)

      // A paused agent is not found either.
      const challenge = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "x" } } }))
      expect(challenge.status).toBe(402)
      expect((challenge.body as unknown as { accepts: Array<{ maxAmountRequired: string }> }).accepts[0]?.maxAmountRequired).toBe("11000")
      expect(challenge.body.error?.details).toMatchObject({ price: "0.011000", reason: "payment_required" })
    }))

  it.scoped("agent failures are EXECUTION_FAILED with the agent's error, the payment stays held for a retry", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "model crashed" } })
      const agentId = yield* registerAgent(devAccount(6), agent.url, { tier: "premium" })
      const behaviours = [
        [{ kind: "json", status: 500, body: { error: "model crashed" } }, /500/],
        ["invalid-json", /JSON/i],
        [{ kind: "json", status: 200, body: { wrong: true } }, /outputSchema/],
        ["close-socket", /./],
        [{ kind: "oversize", bytes: 3_000_000 }, /./]
      ] as const
      for (const [behaviour, pattern] of behaviours) {
        agent.setBehaviour(behaviour)
        const response = yield* execute(devAccount(7), { targetAgentId: agentId, capabilityId: "echo", input: { text: "x" } })
        expect(response.status).toBe(502)
        expect(response.body.error?.code).toBe("EXECUTION_FAILED")
        expect(response.body.error?.details.agentError).toMatch(pattern)
        expect(response.body.error?.details).toMatchObject({ status: "failed", settlement: { status: "settled" } })
        expect(response.body.error?.details.retryUntil).toBeTruthy()
        const [escrow] = yield* sql<{ status: string }>`SELECT s.status FROM escrows s WHERE s.execution_id = ${response.body.error?.details.requestId}`
        expect(escrow?.status).toBe("held")
      }
      const balance = yield* balanceOf(agentId)
      expect(balance.body.data).toMatchObject({ available: "0.000000", pending: "0.000000", escrow: { pendingCount: 5, pendingTotal: "0.055000" } })
      yield* foldOutcomes
      const [scores] = yield* sql<{ reputationScore: number; healthScore: number }>`SELECT reputation_score, health_score FROM agents WHERE id = ${agentId}`
      expect(scores?.reputationScore).toBe(40)
      expect(scores?.healthScore).toBeCloseTo(0.9 ** 5, 6)
    }))

  it.scoped("a slow agent times out: EXECUTION_TIMEOUT, status timeout, payment held", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent({ kind: "delay", ms: 5_000, then: "echo" })
      const agentId = yield* registerAgent(devAccount(8), agent.url, { tier: "premium" })
      const started = Date.now()
      const response = yield* execute(devAccount(7), { targetAgentId: agentId, capabilityId: "echo", input: { text: "x" } })
      expect(Date.now() - started).toBeLessThan(4_500)
      expect(response.status).toBe(504)
      expect(response.body.error?.code).toBe("EXECUTION_TIMEOUT")
      expect(response.body.error?.details).toMatchObject({ status: "timeout", settlement: { status: "settled" } })
    }))

  it.scoped("failure, then a retry on the original payment succeeds: charged once, output released", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "fail-times", n: 1, then: "echo" })
      const agentId = yield* registerAgent(devAccount(9), agent.url, { tier: "premium" })
      const payer = devAccount(3)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const failed = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "again" } })
      expect(failed.status).toBe(502)
      const requestId: string = failed.body.error?.details.requestId
      const paymentHeader = failed.headers.get("x-payment-used") ?? ""
      expect(paymentHeader).not.toBe("")

      const stranger = yield* Effect.promise(() => signPayment({ account: payer, value: PRICE }))
      const refused = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}/retry`, { method: "POST", headers: { "X-PAYMENT": stranger.header } }))
      expect(refused.status).toBe(403)
      expect(refused.body.error?.code).toBe("RETRY_NOT_AUTHORIZED")

      const retried = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}/retry`, { method: "POST", headers: { "X-PAYMENT": paymentHeader } }))
      expect(retried.status).toBe(200)
      expect(retried.body.data).toMatchObject({ requestId, status: "completed", output: { echo: { text: "again" } }, attempts: 2 })
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
      expect(agent.calls).toHaveLength(2)

      const again = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}/retry`, { method: "POST", headers: { "X-PAYMENT": paymentHeader } }))
      expect(again.status).toBe(409)
      expect(again.body.error?.code).toBe("EXECUTION_NOT_RETRYABLE")
      expect((yield* balanceOf(agentId)).body.data.available).toBe("0.008500")
    }))

  it.scoped("status: anyone sees the status and settlement, only the payment holder sees output and cost", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const target = yield* registerAgent(devAccount(5), agent.url, { tier: "premium" })
      const response = yield* execute(devAccount(2), { targetAgentId: target, capabilityId: "echo", input: { text: "mine" } })
      expect(response.status).toBe(200)
      const requestId: string = response.body.data.requestId
      const anonymous = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}`))
      expect(anonymous.status).toBe(200)
      expect(anonymous.body.data).toMatchObject({ requestId, status: "completed", settlement: { status: "settled" } })
      expect(anonymous.body.data.output).toBeUndefined()
      expect(anonymous.body.data.cost).toBeUndefined()
      expect(anonymous.body.data.message).toMatch(/X-PAYMENT/)
      const paymentHeader = response.headers.get("x-payment-used") ?? ""
      const owner = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}`, { headers: { "X-PAYMENT": paymentHeader } }))
      expect(owner.body.data).toMatchObject({ output: { echo: { text: "mine" } }, cost: { agentFee: "0.010000", platformFee: "0.001000" } })
      expect(owner.headers.get("x-payment-used")).toBe(paymentHeader)
      const missing = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/req_doesnotexist123`))
      expect(missing.status).toBe(404)
      expect(missing.body.error?.code).toBe("EXECUTION_NOT_FOUND")
    }))

  it.scoped("?async=true answers 202 with a job id and a status URL that shows the result once done", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent({ kind: "delay", ms: 200, then: "echo" })
      const agentId = yield* registerAgent(devAccount(7), agent.url, { tier: "premium" })
      const response = yield* execute(devAccount(6), { targetAgentId: agentId, capabilityId: "echo", input: { text: "later" } }, "?async=true")
      expect(response.status).toBe(202)
      expect(response.body.data).toMatchObject({ status: "pending" })
      expect(response.body.data.jobId).toMatch(/^job_/)
      const statusUrl: string = response.body.data.statusUrl
      expect(statusUrl).toContain(`/api/v1/execute/${response.body.data.jobId}`)
      const paymentHeader = response.headers.get("x-payment-used") ?? ""
      const done = yield* eventually(
        Effect.promise(() => call(statusUrl, { headers: { "X-PAYMENT": paymentHeader } })),
        (r) => r.body.data?.status === "completed" && r.body.data?.settlement?.status === "settled"
      )
      expect(done.body.data.output).toMatchObject({ echo: { text: "later" } })
    }))

  it.scoped("a callbackUrl gets the result posted, signed with the payment header's hash", () =>
    Effect.gen(function* () {
      const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = []
      const receiver = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<http.Server>((resolve) => {
            const server = http.createServer((req, res) => {
              let body = ""
              req.on("data", (c: Buffer) => (body += c.toString()))
              req.on("end", () => {
                received.push({ headers: req.headers, body })
                res.writeHead(200).end("ok")
              })
            })
            server.listen(0, "127.0.0.1", () => resolve(server))
          })
        ),
        (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
      )
      const port = (receiver.address() as AddressInfo).port
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(2), agent.url, { tier: "premium" })
      const response = yield* execute(devAccount(3), {
        targetAgentId: agentId,
        capabilityId: "echo",
        input: { text: "call me" },
        callbackUrl: `http://127.0.0.1:${port}/hook`
      })
      expect(response.status).toBe(202)
      const requestId: string = response.body.data.requestId
      yield* eventually(Effect.sync(() => received.length), (n) => n >= 1)
      const post = received[0]!
      const payload = JSON.parse(post.body)
      expect(payload).toMatchObject({ requestId, status: "completed", output: { echo: { text: "call me" } }, cost: { total: "0.011000" } })
      expect(typeof payload.executionTime).toBe("number")
      const secret = createHash("sha256").update(response.headers.get("x-payment-used") ?? "").digest("hex")
      expect(post.headers["x-webhook-signature"]).toBe(`sha256=${createHmac("sha256", secret).update(post.body).digest("hex")}`)
      expect(post.headers["x-webhook-event"]).toBe("execution.completed")
      expect(post.headers["x-webhook-attempt"]).toBe("1")
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
