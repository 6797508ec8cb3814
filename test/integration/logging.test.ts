// Request logs: one JSON line per request with its fields, the request id the client gets back, the caller's trace id;
// no payment header, signature, bearer token or configured secret on any line. Background logs: each background action
// and failure (an agent's error, a refund, a circuit, a dead letter, a dispute) writes one line with its ids and cause.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { MachineHost } from "../../machines/Host.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, signPayment, walletAuth } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { capturingStdout, recordingLogs } from "../support/logs.js"
import { receiver } from "../support/receivers.js"
import { execute, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"

layer(TestApp({ LOG_FORMAT: "json", LOG_LEVEL: "info", BACKGROUND_WORKERS: "false" }), { excludeTestServices: true })("request logs", (it) => {
  it.scoped("a paid call logs one JSON line with method, route, path, status, duration, request id and trace id, and never its payment header", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agentId = yield* registerAgent(devAccount(1), (yield* fakeAgent("echo")).url, { tier: "premium" })
      const { header } = yield* Effect.promise(() => signPayment({ account: devAccount(2), value: PRICE }))
      const signature: string = JSON.parse(Buffer.from(header, "base64").toString("utf8")).payload.signature
      const bearer = "client-bearer-never-logged-0123"

      const { result, lines } = yield* capturingStdout(
        Effect.promise(async () => {
          const paid = await call(`${baseUrl}/api/v1/execute`, {
            method: "POST",
            json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "log me" } },
            headers: { "X-PAYMENT": header, "X-Request-Id": "client-req-0001", traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01`, authorization: `Bearer ${bearer}` }
          })
          const strange = await call(`${baseUrl}/api/v1/agents/${agentId}`, { headers: { "X-Request-Id": "has spaces and\ttabs" } })
          const operator = await call(`${baseUrl}/api/v1/operator/treasury/reconciliation`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })
          return { paid, strange, operator }
        })
      )
      expect(result.paid.status).toBe(200)
      expect(result.paid.headers.get("x-request-id")).toBe("client-req-0001")
      const generated = result.strange.headers.get("x-request-id")
      expect(generated).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)

      // One JSON object per line, whatever was logged.
      const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
      const paidLines = records.filter((r) => r["requestId"] === "client-req-0001")
      expect(paidLines).toHaveLength(1)
      const line = paidLines[0]!
      expect(line).toMatchObject({
        level: "info",
        msg: "POST /api/v1/execute 200",
        method: "POST",
        route: "/api/v1/execute",
        path: "/api/v1/execute",
        status: 200,
        requestId: "client-req-0001",
        traceId: TRACE_ID
      })
      expect(new Date(String(line["time"])).toISOString()).toBe(line["time"])
      expect(line["durationMs"]).toEqual(expect.any(Number))
      expect(Number(line["durationMs"])).toBeGreaterThan(0)
      // Templates, not raw paths, name the route; the raw path stays beside it.
      expect(records.find((r) => r["requestId"] === generated)).toMatchObject({ route: "/api/v1/agents/:id", path: `/api/v1/agents/${agentId}`, status: 200 })
      expect(records.filter((r) => r["route"] === "/api/v1/operator/treasury/reconciliation")).toHaveLength(1)

      const all = lines.join("\n")
      for (const secret of [header, signature, signature.slice(2), bearer, OPERATOR_TOKEN]) expect(all).not.toContain(secret)
      expect(all.toLowerCase()).not.toContain("x-payment")
      expect(all.toLowerCase()).not.toContain("authorization")
    }))
})

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))
const operator = { authorization: `Bearer ${OPERATOR_TOKEN}`, "x-operator": "night desk" }
const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, { method: init.method ?? (init.json === undefined ? "GET" : "POST"), ...(init.json === undefined ? {} : { json: init.json }), headers: init.headers ?? {} })))

/** Every timer due at the test clock's time, fired. */
const fireAll = Effect.flatMap(MachineHost, (host) => Effect.iterate(1, { while: (n) => n > 0, body: () => host.fireDue }))

layer(TestApp({ LOG_FORMAT: "json", LOG_LEVEL: "info", BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "60" }))("background logs", (it) => {
  it.scoped("an agent's failure (request line and execution), the refund it leads to, and a circuit forced open and closed each log their ids and cause", () =>
    Effect.gen(function* () {
      yield* realNow
      const logs = yield* recordingLogs
      const agentId = yield* registerAgent(devAccount(3), (yield* fakeAgent({ kind: "json", status: 500, body: { error: "agent exploded" } })).url, { tier: "premium" })
      const failed = yield* execute(devAccount(4), { targetAgentId: agentId, capabilityId: "echo", input: { text: "fail" } })
      expect(failed.status).toBe(502)
      const executionId: string = failed.body.error?.details.requestId
      expect(executionId).toMatch(/^req_/)

      // The 502's request line says which execution failed and why; the execution's own line too.
      const requestLine = logs.records().find((r) => r["route"] === "/api/v1/execute" && r["status"] === 502)
      expect(requestLine).toMatchObject({ executionId, cause: expect.stringContaining("500") })
      const [agentFailed] = logs.find("execution.failed", { executionId })
      expect(agentFailed).toMatchObject({ level: "warn", machine: "execution", trigger: "AGENT_FAILED", cause: expect.stringContaining("500") })

      // The retry window closes: a refund is owed, then sent and confirmed on chain (hash and amount on both lines).
      yield* TestClock.adjust(61_000)
      yield* fireAll
      expect(logs.find("execution.refunding", { executionId })).toHaveLength(1)
      yield* (yield* Refunds).sendDue
      const [sent] = logs.find("treasury.sent", { purpose: "refund", executionId })
      expect(sent).toMatchObject({ level: "info", refundId: expect.stringMatching(/./), treasuryTxId: expect.stringMatching(/^ttx_/), txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
      const { sql } = yield* TestEnv
      const [refund] = yield* sql<{ id: string; amount: string; txHash: string }>`SELECT id, amount::text, tx_hash FROM refunds WHERE execution_id = ${executionId}`
      expect(sent).toMatchObject({ refundId: refund!.id, amountMicroUsdc: refund!.amount })
      expect(logs.find("refund.confirmed", { refundId: refund!.id })).toEqual([
        expect.objectContaining({ level: "info", executionId, amountMicroUsdc: refund!.amount, txHash: refund!.txHash, treasuryTxId: sent!["treasuryTxId"] })
      ])

      // An operator forces the agent's circuit open, then closed: who and why on each line.
      for (const state of ["open", "closed"]) {
        const pulled = yield* api(`/api/v1/operator/circuits/${agentId}/force`, { json: { state, reason: `drill ${state}` }, headers: operator })
        expect(pulled.status).toBe(200)
      }
      expect(logs.find("circuit.open", { agentId })).toEqual([expect.objectContaining({ level: "warn", operator: "night desk", cause: "drill open" })])
      expect(logs.find("circuit.closed", { agentId })).toEqual([expect.objectContaining({ level: "info", operator: "night desk", cause: "drill closed" })])
    }))

  it.scoped("a receiver that keeps failing: each failed attempt and the dead letter log the delivery, subscription and last status", () =>
    Effect.gen(function* () {
      yield* realNow
      const logs = yield* recordingLogs
      const owner = devAccount(5)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([503])
      const created = yield* api("/api/v1/webhooks", {
        json: { agentId, url: hook.url, events: ["execution.completed"] },
        headers: yield* Effect.promise(() => walletAuth(owner, agentId))
      })
      expect(created.status).toBe(201)
      const subscriptionId: string = created.body.data.id
      expect((yield* execute(devAccount(6), { targetAgentId: agentId, capabilityId: "echo", input: { text: "hook" } })).status).toBe(200)
      const dispatcher = yield* Dispatcher
      yield* dispatcher.dispatchDue
      for (let round = 1; round <= 5; round++) {
        yield* dispatcher.sendDue
        yield* TestClock.adjust(300_001)
      }
      const { sql } = yield* TestEnv
      const [delivery] = yield* sql<{ id: string }>`SELECT id FROM webhook_deliveries WHERE subscription_id = ${subscriptionId}`
      const attempts = logs.find("webhookDelivery.attempt_failed", { deliveryId: delivery!.id })
      expect(attempts).toHaveLength(4)
      for (const line of attempts) expect(line).toMatchObject({ level: "warn", lastStatus: 503, cause: expect.stringContaining("503") })
      const [dlq] = yield* sql<{ id: string }>`SELECT id FROM webhook_dead_letters WHERE delivery_id = ${delivery!.id}`
      expect(logs.find("webhookDelivery.dead", { deliveryId: delivery!.id })).toEqual([
        expect.objectContaining({ level: "error", subscriptionId, deadLetterId: dlq!.id, attempts: 5, lastStatus: 503, cause: expect.stringContaining("503") })
      ])
    }))

  it.scoped("a dispute left unanswered escalates and is then resolved: both lines name the dispute", () =>
    Effect.gen(function* () {
      yield* realNow
      const logs = yield* recordingLogs
      const agentId = yield* registerAgent(devAccount(7), (yield* fakeAgent("echo")).url, { tier: "premium" })
      const paid = yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text: "dispute me" } })
      expect(paid.status).toBe(200)
      const { sql } = yield* TestEnv
      const [row] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${paid.body.data.requestId}`
      const opened = yield* api("/api/v1/disputes", {
        json: { transactionId: row!.transactionId, reason: "quality", evidence: "wrong" },
        headers: { "X-Client-Id": paid.headers.get("x-client-id") ?? "" }
      })
      expect(opened.status).toBe(201)
      const disputeId: string = opened.body.data.disputeId
      yield* TestClock.adjust(49 * 60 * 60 * 1000)
      yield* fireAll
      expect(logs.find("dispute.escalated", { disputeId })).toEqual([expect.objectContaining({ level: "warn", machine: "dispute", trigger: "RESPONSE_DUE" })])
      const resolved = yield* api(`/api/v1/operator/disputes/${disputeId}/resolve`, { json: { resolution: "resolved_agent" }, headers: operator })
      expect(resolved.status).toBe(200)
      expect(logs.find("dispute.resolved_agent", { disputeId })).toEqual([expect.objectContaining({ level: "info", trigger: "RESOLVE" })])
    }))
})
