// Request logs: one JSON line per request with its fields, the request id the client gets back, the caller's trace id;
// no payment header, signature, bearer token or configured secret on any line.
import { expect, layer } from "@effect/vitest"
import { vi } from "vitest"
import { Effect } from "effect"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, signPayment } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice

/** Every line the service writes to stdout while `effect` runs (not passed on to the terminal). */
const capturingStdout = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
          lines.push(...String(chunk).split("\n").filter((l) => l !== ""))
          return true
        })),
      (spy) => Effect.sync(() => spy.mockRestore())
    )
    const result = yield* effect
    return { result, lines } as const
  })

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
