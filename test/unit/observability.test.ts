import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Either, FiberId, FiberRef, FiberRefs, HashMap, List, LogLevel, Option, Redacted } from "effect"
import { jsonLine, prettyLine, scrub } from "../../layers/observability/Logging.js"
import { reachedStatus } from "../../layers/observability/machines.js"
import { requestIdOf } from "../../layers/observability/requests.js"
import { apiRoutes, makeRouteMatcher } from "../../layers/observability/routes.js"
import { parseOtlpHeaders } from "../../layers/observability/Tracing.js"
import { outboundTraceparent } from "../../layers/outbound/trace.js"
import { Api } from "../../src/http/Api.js"
import { metricsAccess } from "../../src/http/Metrics.js"

const logOptions = (message: unknown, annotations: Record<string, unknown> = {}, cause: Cause.Cause<unknown> = Cause.empty) => ({
  fiberId: FiberId.none,
  logLevel: LogLevel.Info,
  message,
  cause,
  context: FiberRefs.unsafeMake(new Map()),
  spans: List.empty(),
  annotations: HashMap.fromIterable(Object.entries(annotations)),
  date: new Date("2026-11-23T10:00:00.123Z")
})

describe("route templates", () => {
  const routes = makeRouteMatcher(apiRoutes(Api, [["GET", "/metrics"]]))

  it("names a request by its route template, whatever ids the path holds", () => {
    expect(routes.match("GET", "/api/v1/agents/0b6e1b3c-1f0a-4c53-9f55-2b7f1d3f0c11")).toBe("/api/v1/agents/:id")
    expect(routes.match("GET", "/api/v1/execute/req_abc?verbose=1")).toBe("/api/v1/execute/:requestId")
    expect(routes.match("POST", "/api/v1/execute/req_abc/retry")).toBe("/api/v1/execute/:requestId/retry")
    expect(routes.match("GET", "/metrics")).toBe("/metrics")
  })

  it("prefers a static segment over a parameter and falls back to the parameter when the static branch has no route", () => {
    expect(routes.match("GET", "/api/v1/agents/check-wallet/0xabc")).toBe("/api/v1/agents/check-wallet/:wallet")
    expect(routes.match("GET", "/api/v1/agents/check-wallet")).toBe("/api/v1/agents/:id")
    expect(routes.match("GET", "/api/v1/discover/search")).toBe("/api/v1/discover/search")
  })

  it("answers HEAD with the GET route and nothing for a method or path no route serves", () => {
    expect(routes.match("HEAD", "/health")).toBe("/health")
    expect(routes.match("POST", "/health")).toBeUndefined()
    expect(routes.match("GET", "/etc/passwd")).toBeUndefined()
    expect(routes.match("GET", `/${"a/".repeat(40)}`)).toBeUndefined()
  })
})

describe("request ids", () => {
  it("keeps a sane client id and replaces anything long, empty or with odd characters by a UUID", () => {
    expect(requestIdOf("0b6e1b3c-1f0a-4c53-9f55-2b7f1d3f0c11")).toBe("0b6e1b3c-1f0a-4c53-9f55-2b7f1d3f0c11")
    expect(requestIdOf("Root=1-67891233-abcdef012345678912345678")).toBe("Root=1-67891233-abcdef012345678912345678")
    for (const bad of [undefined, "", "a b", "x\ny", "<script>", "é", "a".repeat(129)]) {
      expect(requestIdOf(bad)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    }
  })
})

describe("log lines", () => {
  it("one JSON object: message text, the fields passed with it, annotations; bigints as strings, secrets redacted", () => {
    const line = jsonLine(logOptions(["POST /api/v1/execute 200", { status: 200, amount: 11_000n, key: Redacted.make("s3cret") }], { requestId: "r1" }))
    expect(line).not.toContain("\n")
    expect(line).not.toContain("s3cret")
    expect(JSON.parse(line)).toEqual({
      time: "2026-11-23T10:00:00.123Z",
      level: "info",
      msg: "POST /api/v1/execute 200",
      status: 200,
      amount: "11000",
      key: "<redacted>",
      requestId: "r1"
    })
  })

  it("carries the failure under error and the trace of the current span", () => {
    const refs = FiberRefs.updateAs(FiberRefs.unsafeMake(new Map()), {
      fiberId: FiberId.none,
      fiberRef: FiberRef.currentContext,
      value: Effect.runSync(Effect.withSpan(Effect.context<never>(), "test"))
    })
    const record = JSON.parse(jsonLine({ ...logOptions("failed", {}, Cause.fail(new Error("boom"))), context: refs }))
    expect(record.error).toContain("boom")
    expect(record.traceId).toMatch(/^[0-9a-f]{32}$/)
  })

  it("readable in devnet: time, level, message, then only the fields the message does not already show", () => {
    const line = prettyLine(logOptions(["GET /health 200", { method: "GET", route: "/health", status: 200, durationMs: 1.5 }], { requestId: "r1" }))
    expect(line).toBe("10:00:00.123 INFO  GET /health 200  durationMs=1.5 requestId=r1")
  })
})

describe("secrets in log lines", () => {
  it("replaces every occurrence of a secret, and leaves strings too short to be one", () => {
    const rpc = "https://base-sepolia.example.com/v2/k3y-abcdef123456"
    expect(scrub(`request to ${rpc} failed; again ${rpc}`, [rpc])).toBe("request to <redacted> failed; again <redacted>")
    expect(scrub("status 200 in 12 ms", ["200", "12 ms"])).toBe("status 200 in 12 ms")
  })
})

describe("executions by status", () => {
  it("counts an execution when its API status changes to a final one, once", () => {
    expect(reachedStatus("running", "completed.held")).toBe("completed")
    expect(reachedStatus("completed.held", "completed.released")).toBeUndefined()
    expect(reachedStatus("running", "failed")).toBe("failed")
    expect(reachedStatus("running", "timeout")).toBe("timeout")
    expect(reachedStatus("refunding", "refunded")).toBe("refunded")
    expect(reachedStatus("failed", "refunding")).toBeUndefined()
    expect(reachedStatus("failed", "running")).toBeUndefined()
  })
})

describe("metrics access", () => {
  const token = Option.some(Redacted.make("metrics-token-0123456789"))
  it("is open on devnet without METRICS_TOKEN, and needs the bearer token otherwise (never open against a real chain)", () => {
    expect(metricsAccess("devnet", Option.none())(undefined)).toBe(true)
    expect(metricsAccess("devnet", token)(undefined)).toBe(false)
    expect(metricsAccess("devnet", token)("Bearer wrong-token-0123456789")).toBe(false)
    expect(metricsAccess("devnet", token)("Bearer metrics-token-0123456789")).toBe(true)
    expect(metricsAccess("rpc", Option.none())(undefined)).toBe(false)
    expect(metricsAccess("rpc", Option.none())("Bearer anything")).toBe(false)
    expect(metricsAccess("rpc", token)("bearer metrics-token-0123456789")).toBe(true)
  })
})

describe("OTLP settings", () => {
  it("reads exporter headers as key=value pairs with percent-encoded values", () => {
    expect(parseOtlpHeaders("api-key=a%20b, X-Team=core")).toEqual(Either.right({ "api-key": "a b", "x-team": "core" }))
    expect(parseOtlpHeaders("")).toEqual(Either.right({}))
    expect(Either.isLeft(parseOtlpHeaders("novalue"))).toBe(true)
  })
})

describe("outbound traceparent", () => {
  const chain = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
  it.effect("with a recording tracer the agent gets the call's own span, unless the caller's traceparent is another trace's", () =>
    Effect.gen(function* () {
      const span = yield* Effect.currentSpan
      const own = `00-${span.traceId}-${span.spanId}-01`
      expect(yield* outboundTraceparent(undefined)).toBe(own)
      expect(yield* outboundTraceparent(`00-${span.traceId}-00f067aa0ba902b7-01`)).toBe(own)
      expect(yield* outboundTraceparent(chain)).toBe(chain)
    }).pipe(Effect.withSpan("AgentProxy.call")))

  it.effect("with tracing off the caller's valid traceparent passes, and a malformed one is replaced", () =>
    Effect.gen(function* () {
      expect(yield* outboundTraceparent(chain)).toBe(chain)
      const fresh = yield* outboundTraceparent("00-zz-11-01")
      expect(fresh).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
    }).pipe(Effect.withSpan("AgentProxy.call"), Effect.withTracerEnabled(false)))
})
