// Traces over OTLP/HTTP to an in-process receiver: one paid execution is one trace (server span, Paywall.charge, the
// agent call whose span the agent receives as traceparent); a caller's traceparent is continued, through a chain too;
// no payment header reaches a span; the default protobuf export carries the same ids.
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { PrivateKeyAccount } from "viem/accounts"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, signPayment, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, registerAgent } from "../support/scenario.js"

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: Record<string, unknown> }>
}

interface Receiver {
  readonly url: string
  /** Raw bodies with their content type, in arrival order. */
  readonly bodies: Array<{ readonly contentType: string; readonly body: Buffer }>
  /** Spans of every JSON body received so far. */
  readonly spans: () => Array<OtlpSpan>
  readonly serviceNames: () => Array<string>
}

/** An OTLP/HTTP collector on loopback: keeps every POST /v1/traces body; closed with the test's scope. */
const otlpReceiver = Effect.acquireRelease(
  Effect.async<Receiver & { readonly server: http.Server }>((resume) => {
    const bodies: Array<{ contentType: string; body: Buffer }> = []
    const json = () => bodies.filter((b) => b.contentType.startsWith("application/json")).map((b) => JSON.parse(b.body.toString("utf8")))
    const server = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        if (req.method === "POST" && req.url === "/v1/traces") bodies.push({ contentType: String(req.headers["content-type"]), body: Buffer.concat(chunks) })
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        bodies,
        server,
        spans: () => json().flatMap((d) => d.resourceSpans.flatMap((r: { scopeSpans: Array<{ spans: Array<OtlpSpan> }> }) => r.scopeSpans.flatMap((s) => s.spans))),
        serviceNames: () =>
          json().flatMap((d) =>
            d.resourceSpans.flatMap((r: { resource: { attributes: OtlpSpan["attributes"] } }) =>
              r.resource.attributes.filter((a) => a.key === "service.name").map((a) => String(a.value["stringValue"]))))
      }))
    )
  }),
  ({ server }) => Effect.sync(() => server.close())
)

/** The receiver in use by the tests of a layer. */
class OtlpReceiver extends Context.Tag("test/OtlpReceiver")<OtlpReceiver, Receiver>() {}

/** The service exporting to a receiver started first (the exporter's URL is a setting), every 50 ms. */
const TracedApp = (settings: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.map(otlpReceiver, (receiver) =>
      Layer.merge(
        TestApp({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "50", BACKGROUND_WORKERS: "false", ...settings }),
        Layer.succeed(OtlpReceiver, receiver)
      ))
  )

const attribute = (span: OtlpSpan | undefined, key: string) => {
  const value = span?.attributes.find((a) => a.key === key)?.value
  return value === undefined ? undefined : (value["stringValue"] ?? value["intValue"] ?? value["boolValue"])
}

const parentOf = (traceparent: unknown) => {
  const [, traceId, spanId] = String(traceparent).split("-")
  return { traceId, spanId }
}

/** Polls the receiver until `check` holds for the spans of `traceId` (the exporter sends every 50 ms). */
const spansOf = (receiver: Receiver, traceId: string, check: (spans: Array<OtlpSpan>) => boolean) =>
  Effect.sync(() => receiver.spans().filter((s) => s.traceId === traceId)).pipe(
    Effect.filterOrFail(check, () => "not yet" as const),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(200)))),
    Effect.orDie
  )

const named = (spans: ReadonlyArray<OtlpSpan>, name: string) => spans.filter((s) => s.name === name)

/** Every span but the root hangs off another span of the same trace. */
const expectOneTree = (spans: ReadonlyArray<OtlpSpan>, rootParent?: string) => {
  const ids = new Set(spans.map((s) => s.spanId))
  const roots = spans.filter((s) => s.parentSpanId === undefined || s.parentSpanId === rootParent || !ids.has(s.parentSpanId))
  expect(roots.map((s) => [s.name, s.parentSpanId])).toEqual([["http.server POST", rootParent]])
}

const PRICE = 11_000n

const paidExecute = (agentId: string, headers: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const { header } = yield* Effect.promise(() => signPayment({ account: devAccount(2), value: PRICE }))
    const response = yield* Effect.promise(() =>
      call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "trace me" } }, headers: { "X-PAYMENT": header, ...headers } }))
    expect(response.status, JSON.stringify(response.body)).toBe(200)
    return { response, header }
  })


/** An agent that hires `target` through the marketplace with the X-Chain-Token and traceparent it was sent. */
const forwardingAgent = (baseUrl: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly received: Array<http.IncomingHttpHeaders>; target: string; readonly server: http.Server }>((resume) => {
      const state = { target: "", received: new Array<http.IncomingHttpHeaders>() }
      const server = http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (c: Buffer) => chunks.push(c))
        req.on("end", async () => {
          state.received.push(req.headers)
          const { input } = JSON.parse(Buffer.concat(chunks).toString("utf8"))
          const sub = await fetch(`${baseUrl}/api/v1/execute`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-chain-token": String(req.headers["x-chain-token"]), traceparent: String(req.headers["traceparent"]) },
            body: JSON.stringify({ targetAgentId: state.target, capabilityId: "echo", input: { text: "from A" } })
          })
          const body = JSON.stringify({ echo: input, sub: sub.status })
          res.writeHead(200, { "content-type": "application/json" }).end(body)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/execute`
        resume(Effect.succeed(Object.assign(state, { url, server })))
      })
    }),
    ({ server }) => Effect.sync(() => server.close())
  )

/** Chaining on for an agent (its owner signs the update). */
const enableChaining = (owner: PrivateKeyAccount, agentId: string) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const patched = yield* Effect.promise(async () =>
      call(`${baseUrl}/api/v1/agents/${agentId}`, {
        method: "PATCH",
        headers: await walletAuth(owner, agentId),
        json: { capabilities: [echoCapability()], chainSettings: { chain_enabled: true, chain_max_depth: 3, chain_allowed_callers: [], chain_blocked_callers: [] } }
      }))
    expect(patched.status, JSON.stringify(patched.body)).toBe(200)
  })

layer(TracedApp({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }), { excludeTestServices: true })("tracing over OTLP/JSON", (it) => {
  it.scoped("one paid execution is one trace: the server span, Paywall.charge, settlement and the agent call whose span the agent receives", () =>
    Effect.gen(function* () {
      const receiver = yield* OtlpReceiver
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const { baseUrl } = yield* TestEnv
      yield* Effect.promise(() => Promise.all(["/health", "/metrics"].map((p) => fetch(`${baseUrl}${p}`).then((r) => r.arrayBuffer()))))
      const { header } = yield* paidExecute(agentId)
      const sent = parentOf(agent.calls[0]?.headers["traceparent"])
      const trace = yield* spansOf(receiver, String(sent.traceId), (spans) => named(spans, "http.server POST").length === 1 && named(spans, "AgentProxy.call").length === 1)

      const [server] = named(trace, "http.server POST")
      expect(server?.kind).toBe(2)
      expect(attribute(server, "http.route")).toBe("/api/v1/execute")
      expect(attribute(server, "http.response.status_code")).toBe(200)
      for (const name of ["Paywall.charge", "Executions.execute", "Payments.settleOnChain", "Executions.callAgent"]) expect(named(trace, name)).toHaveLength(1)
      // The agent's parent span is our call to it.
      expect(named(trace, "AgentProxy.call")[0]?.spanId).toBe(sent.spanId)
      expectOneTree(trace)
      // Only this request's spans are in its trace: no other request joined it.
      expect(receiver.spans().filter((s) => s.name === "http.server POST" && s.traceId === sent.traceId)).toHaveLength(1)
      expect(receiver.serviceNames()).toContain("agent-marketplace")
      // Probes and scrapes are never traced (their spans, SQL included, would be most of the traces).
      expect(receiver.spans().filter((s) => ["/health", "/metrics"].includes(String(attribute(s, "http.route"))))).toEqual([])
      // Header values that carry payments and credentials never reach a span.
      expect(attribute(server, "http.request.header.x-payment")).toBe("<redacted>")
      const exported = receiver.bodies.map((b) => b.body.toString("utf8")).join("\n")
      const signature: string = JSON.parse(Buffer.from(header, "base64").toString("utf8")).payload.signature
      expect(exported).not.toContain(header)
      expect(exported).not.toContain(signature)
    }))

  it.scoped("a caller's traceparent is continued: our server span is its child, and the agent gets the same trace", () =>
    Effect.gen(function* () {
      const receiver = yield* OtlpReceiver
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), agent.url, { tier: "premium" })
      const caller = { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331" }
      yield* paidExecute(agentId, { traceparent: `00-${caller.traceId}-${caller.spanId}-01` })
      expect(parentOf(agent.calls[0]?.headers["traceparent"]).traceId).toBe(caller.traceId)
      const trace = yield* spansOf(receiver, caller.traceId, (spans) => named(spans, "http.server POST").length === 1 && named(spans, "AgentProxy.call").length === 1)
      expect(named(trace, "http.server POST")[0]?.parentSpanId).toBe(caller.spanId)
      expectOneTree(trace, caller.spanId)
    }))

  it.scoped("a chain stays one trace when the agent forwards the traceparent it was sent with its sub-call", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const receiver = yield* OtlpReceiver
      const a = yield* forwardingAgent(baseUrl)
      const b = yield* fakeAgent("echo")
      const A = yield* registerAgent(devAccount(4), a.url, { tier: "premium" })
      const B = yield* registerAgent(devAccount(5), b.url, { tier: "premium" })
      yield* enableChaining(devAccount(4), A)
      yield* enableChaining(devAccount(5), B)
      a.target = B
      const root = yield* Effect.promise(() =>
        paidCall(devAccount(6), `${baseUrl}/api/v1/execute`, { json: { targetAgentId: A, capabilityId: "echo", input: { text: "root" } }, headers: { "X-Chain-Budget": "0.10" } }))
      expect(root.status, JSON.stringify(root.body)).toBe(200)
      expect(root.body.data.output.sub).toBe(200)

      const toA = parentOf(a.received[0]?.["traceparent"])
      const toB = parentOf(b.calls[0]?.headers["traceparent"])
      expect(toB.traceId).toBe(toA.traceId)
      const trace = yield* spansOf(receiver, String(toA.traceId), (spans) => named(spans, "http.server POST").length === 2 && named(spans, "AgentProxy.call").length === 2)
      const calls = named(trace, "AgentProxy.call")
      // Root → A (our span) → A's sub-call to us (its server span is that span's child) → B.
      const child = named(trace, "http.server POST").find((s) => s.parentSpanId !== undefined)
      expect(child?.parentSpanId).toBe(toA.spanId)
      expect(calls.map((c) => c.spanId).sort()).toEqual([toA.spanId, toB.spanId].sort())
      expectOneTree(trace)
    }))
})

layer(TracedApp(), { excludeTestServices: true })("tracing over OTLP/protobuf (the default)", (it) => {
  it.scoped("the default export is protobuf and carries the trace the agent was sent", () =>
    Effect.gen(function* () {
      const receiver = yield* OtlpReceiver
      const agent = yield* fakeAgent("echo")
      yield* paidExecute(yield* registerAgent(devAccount(7), agent.url, { tier: "premium" }))
      const { traceId, spanId } = parentOf(agent.calls[0]?.headers["traceparent"])
      const carries = (hex: string) => receiver.bodies.some((b) => b.body.includes(Buffer.from(hex, "hex")))
      yield* Effect.sync(() => carries(String(traceId)) && carries(String(spanId))).pipe(
        Effect.filterOrFail((ok) => ok, () => "not yet" as const),
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(200)))),
        Effect.orDie
      )
      expect(new Set(receiver.bodies.map((b) => b.contentType))).toEqual(new Set(["application/x-protobuf"]))
    }))
})
