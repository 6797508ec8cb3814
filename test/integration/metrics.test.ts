// GET /metrics after real traffic, parsed by a Prometheus text parser: HTTP requests by route template, executions by
// status, settlement latency, and the gauges read from the database at scrape time; the token guard.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import parsePrometheusTextFormat, { type PrometheusFamily } from "parse-prometheus-text-format"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"
import { ATTENTION_KINDS } from "../../src/domain/Attention.js"

type Families = ReadonlyMap<string, PrometheusFamily>

/**
 * The scrape parsed twice: as is (families, types, counters, gauges), and with histograms read as untyped so their
 * `_bucket`, `_sum` and `_count` series keep their labels (the parser merges a labelled histogram into one sample and
 * drops the labels; read untyped, each label set's lines come as their own run, merged here by name).
 */
const parse = (text: string): Families => {
  const merged = new Map<string, PrometheusFamily>()
  for (const f of parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped"))) {
    const seen = merged.get(f.name)
    merged.set(f.name, seen === undefined ? f : { ...seen, metrics: [...seen.metrics, ...f.metrics] })
  }
  for (const f of parsePrometheusTextFormat(text)) merged.set(f.name, f)
  return merged
}

const scrape = (headers: Record<string, string> = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const response = await fetch(`${baseUrl}/metrics`, { headers })
      return { status: response.status, contentType: response.headers.get("content-type"), text: await response.text() }
    }))

const families = Effect.map(scrape(), (r): Families => {
  expect(r.status, r.text).toBe(200)
  return parse(r.text)
})

/** A counter's or gauge's value (0 when the series does not exist yet). */
const valueOf = (fams: Families, name: string, labels: Record<string, string> = {}) =>
  Number(fams.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value ?? 0)

interface HistogramSeries {
  readonly buckets: ReadonlyArray<readonly [le: number, count: number]>
  readonly count: number
  readonly sum: number
}

/** One labelled series of a histogram (zero when it does not exist yet), its buckets in bound order. */
const histogramOf = (fams: Families, name: string, labels: Record<string, string>): HistogramSeries => {
  expect(fams.get(name)?.type).toBe("HISTOGRAM")
  const matching = (suffix: string) =>
    (fams.get(`${name}${suffix}`)?.metrics ?? []).filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
  return {
    buckets: matching("_bucket")
      .map((m) => [m.labels?.["le"] === "+Inf" ? Infinity : Number(m.labels?.["le"]), Number(m.value)] as const)
      .sort((a, b) => a[0] - b[0]),
    count: Number(matching("_count")[0]?.value ?? 0),
    sum: Number(matching("_sum")[0]?.value ?? 0)
  }
}

/** Buckets in bound order are cumulative and the +Inf bucket is the count. */
const expectConsistent = (h: HistogramSeries) => {
  expect(h.buckets.length).toBeGreaterThan(1)
  for (let i = 1; i < h.buckets.length; i++) expect(h.buckets[i]![1]).toBeGreaterThanOrEqual(h.buckets[i - 1]![1])
  expect(h.buckets.at(-1)).toEqual([Infinity, h.count])
}

/** A webhook receiver on loopback answering `status`; closed with the test's scope. */
const receiver = (status: number) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly server: http.Server }>((resume) => {
      const server = http.createServer((req, res) => {
        req.resume()
        req.on("end", () => res.writeHead(status).end())
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server })))
    }),
    ({ server }) => Effect.sync(() => server.close())
  )

const echo = (targetAgentId: string, text: string) => ({ targetAgentId, capabilityId: "echo", input: { text } })

layer(TestApp({ BACKGROUND_WORKERS: "false", METRICS_DB_CACHE_MS: "0" }), { excludeTestServices: true })("metrics", (it) => {
  it.scoped("every money flow is exported from the start at 0, so an alert on refunds has a series before the first refund", () =>
    Effect.gen(function* () {
      const first = yield* families
      const flows = first.get("marketplace_money_micro_usdc_total")
      expect(flows?.type).toBe("COUNTER")
      expect(new Set(flows?.metrics.map((m) => m.labels?.["flow"]))).toEqual(new Set(["paid", "platform_fee", "platform_fee_returned", "refunded", "paid_out"]))
      for (const flow of ["refunded", "paid_out", "platform_fee_returned"]) expect(valueOf(first, "marketplace_money_micro_usdc_total", { flow })).toBe(0)
    }))

  it.scoped("a paid execution is counted under its route template, as a completed execution, as one settlement and as money paid", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agentId = yield* registerAgent(devAccount(1), (yield* fakeAgent("echo")).url, { tier: "premium" })
      const before = yield* families
      const paid = yield* execute(devAccount(2), echo(agentId, "count me"))
      expect(paid.status).toBe(200)
      const requestId: string = paid.body.data.requestId
      expect((yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}`))).status).toBe(200)
      const after = yield* families

      const delta = (name: string, labels: Record<string, string>) => valueOf(after, name, labels) - valueOf(before, name, labels)
      // The x402 client is answered 402 first, then pays.
      expect(delta("marketplace_http_requests_total", { method: "POST", route: "/api/v1/execute", status: "402" })).toBe(1)
      expect(delta("marketplace_http_requests_total", { method: "POST", route: "/api/v1/execute", status: "200" })).toBe(1)
      expect(delta("marketplace_http_requests_total", { method: "GET", route: "/api/v1/execute/:requestId", status: "200" })).toBe(1)
      // Labels are templates: no request id ever becomes a label value.
      const labelValues = [...after.values()].flatMap((f) => f.metrics.flatMap((m) => Object.values(m.labels ?? {})))
      expect(labelValues.filter((v) => v.includes(requestId) || v.includes("req_"))).toEqual([])

      // The latency histogram is labelled by status class: the 402 answer and the paid 200 are separate series.
      for (const status_class of ["2xx", "4xx"]) {
        const executeRoute = { method: "POST", route: "/api/v1/execute", status_class }
        const latency = histogramOf(after, "marketplace_http_request_duration_seconds", executeRoute)
        expectConsistent(latency)
        const earlier = histogramOf(before, "marketplace_http_request_duration_seconds", executeRoute)
        expect(latency.count - earlier.count).toBe(1)
        expect(latency.sum).toBeGreaterThan(earlier.sum)
      }

      // The money counters, in micro-USDC: the payment that settled, the platform's part of it; nothing refunded.
      const [money] = yield* sql<{ price: string; platform: string }>`
        SELECT price::text, (platform_fee + platform_cut)::text AS platform FROM executions WHERE id = ${requestId}`
      expect(delta("marketplace_money_micro_usdc_total", { flow: "paid" })).toBe(Number(money!.price))
      expect(delta("marketplace_money_micro_usdc_total", { flow: "platform_fee" })).toBe(Number(money!.platform))
      expect(delta("marketplace_money_micro_usdc_total", { flow: "refunded" })).toBe(0)
      expect(delta("marketplace_money_micro_usdc_total", { flow: "paid_out" })).toBe(0)
      expect(after.get("marketplace_money_micro_usdc_total")?.type).toBe("COUNTER")

      expect(delta("marketplace_executions_total", { status: "completed" })).toBe(1)
      expect(delta("marketplace_executions_total", { status: "failed" })).toBe(0)
      expect(delta("marketplace_machine_transitions_total", { machine: "settlement", state: "settled" })).toBe(1)
      expect(delta("marketplace_machine_transitions_total", { machine: "execution", state: "completed.released" })).toBe(1)
      const settled = histogramOf(after, "marketplace_settlement_duration_seconds", { outcome: "settled" })
      expectConsistent(settled)
      expect(settled.count - histogramOf(before, "marketplace_settlement_duration_seconds", { outcome: "settled" }).count).toBe(1)
      // Node's own process metrics come along.
      expect(after.get("process_cpu_user_seconds_total")?.type).toBe("COUNTER")
      expect(after.get("nodejs_eventloop_lag_seconds")?.type).toBe("GAUGE")
    }))

  it.scoped("database gauges follow the database at each scrape: webhook queue depth, open circuits, empty backlogs, connections", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const dispatcher = yield* Dispatcher
      const owner = devAccount(3)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver(200)
      const created = yield* Effect.flatMap(TestEnv, ({ baseUrl }) =>
        Effect.promise(async () =>
          call(`${baseUrl}/api/v1/webhooks`, { method: "POST", json: { agentId, url: hook.url, events: ["execution.completed"] }, headers: await walletAuth(owner, agentId) })))
      expect(created.status).toBe(201)
      expect((yield* execute(devAccount(4), echo(agentId, "hook me"))).status).toBe(200)
      yield* dispatcher.dispatchDue

      const queued = yield* families
      expect(valueOf(queued, "marketplace_webhook_queue_depth")).toBe(1)
      expect(valueOf(queued, "marketplace_webhook_queue_overdue")).toBe(1)
      expect(valueOf(queued, "marketplace_webhook_dead_letters")).toBe(0)
      expect(valueOf(queued, "marketplace_db_metrics_up")).toBe(1)
      // The gauges say how old they are (reused for METRICS_DB_CACHE_MS): read just now here.
      expect(valueOf(queued, "marketplace_db_metrics_age_seconds")).toBeGreaterThanOrEqual(0)
      expect(valueOf(queued, "marketplace_db_metrics_age_seconds")).toBeLessThan(5)
      for (const state of ["reserved", "retrying"]) expect(valueOf(queued, "marketplace_settlement_backlog", { state })).toBe(0)
      expect(valueOf(queued, "marketplace_settlement_backlog_oldest_seconds")).toBe(0)
      for (const state of ["pending", "submitted"]) expect(valueOf(queued, "marketplace_refunds_pending", { state })).toBe(0)
      // This scrape's own query holds a connection of the pool (10 in tests).
      const connections = queued.get("marketplace_db_connections")?.metrics ?? []
      expect(connections.reduce((n, m) => n + Number(m.value), 0)).toBeGreaterThanOrEqual(1)
      expect(valueOf(queued, "marketplace_db_connections", { state: "active" })).toBeGreaterThanOrEqual(1)
      expect(valueOf(queued, "marketplace_db_pool_max")).toBe(10)

      yield* dispatcher.sendDue
      expect(valueOf(yield* families, "marketplace_webhook_queue_depth")).toBe(0)

      expect(valueOf(queued, "marketplace_circuits", { state: "open" })).toBe(0)
      yield* sql`UPDATE agents SET circuit_state = 'open' WHERE id = ${agentId}`
      const opened = yield* families
      expect(valueOf(opened, "marketplace_circuits", { state: "open" })).toBe(1)
      expect(valueOf(opened, "marketplace_circuits", { state: "half-open" })).toBe(0)
      yield* sql`UPDATE agents SET circuit_state = 'closed' WHERE id = ${agentId}`
    }))

  it.scoped("console routes are labelled by template (an unlisted console path as /ops/*), never as unmatched", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const before = yield* families
      yield* Effect.promise(async () => {
        for (const path of ["/ops", "/ops/machines/execution", "/ops/machines/execution/req_123", "/ops/not-a-page/at/all"]) {
          await fetch(`${baseUrl}${path}`, { redirect: "manual" }).then((r) => r.text())
        }
      })
      const after = yield* families
      const count = (fams: Families, route: string) =>
        (fams.get("marketplace_http_requests_total")?.metrics ?? []).filter((m) => m.labels?.["route"] === route).reduce((n, m) => n + Number(m.value), 0)
      for (const route of ["/ops", "/ops/machines/:kind", "/ops/machines/:kind/:id", "/ops/*"]) {
        expect(count(after, route) - count(before, route), route).toBe(1)
      }
      expect(count(after, "unmatched")).toBe(count(before, "unmatched"))
    }))

  it.scoped("the needs-attention gauges count each kind of trouble from the database, and the treasury drift is a gauge", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const kinds = [...ATTENTION_KINDS]
      const calm = yield* families
      expect(calm.get("marketplace_attention")?.type).toBe("GAUGE")
      for (const kind of kinds) expect(calm.get("marketplace_attention")?.metrics.some((m) => m.labels?.["kind"] === kind), kind).toBe(true)
      const base = (kind: string) => valueOf(calm, "marketplace_attention", { kind })

      const owner = devAccount(5)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const paid = yield* execute(devAccount(6), echo(agentId, "trouble"))
      expect(paid.status).toBe(200)
      const requestId: string = paid.body.data.requestId
      // Trouble made by hand: each statement stands for what a failing worker, chain or receiver would leave.
      yield* sql`UPDATE payments SET status = 'retrying' WHERE subject_id = ${requestId}`
      // Running, started long before its deadline (agent timeout + grace): what a hanging agent or a dead caller leaves.
      const [was] = yield* sql<{ state: string; machineSnapshot: unknown }>`SELECT state, machine_snapshot FROM executions WHERE id = ${requestId}`
      yield* sql`UPDATE executions SET state = 'running',
                 machine_snapshot = jsonb_set(machine_snapshot, '{context,startedAt}', '0'::jsonb) WHERE id = ${requestId}`
      yield* sql`UPDATE agents SET circuit_state = 'open' WHERE id = ${agentId}`
      yield* sql`INSERT INTO treasury_reconciliations (block_number, chain_balance, ledger_balance, drift, kind, confirmed)
                 VALUES (1, 1000005, 1000000, 5, 'check', true)`
      const troubled = yield* families
      expect(valueOf(troubled, "marketplace_attention", { kind: "settlement_retrying" }) - base("settlement_retrying")).toBe(1)
      expect(valueOf(troubled, "marketplace_attention", { kind: "execution_overdue" }) - base("execution_overdue")).toBe(1)
      expect(valueOf(troubled, "marketplace_attention", { kind: "circuit_open" }) - base("circuit_open")).toBe(1)
      expect(valueOf(troubled, "marketplace_attention", { kind: "reconciliation_drift" })).toBe(1)
      expect(valueOf(troubled, "marketplace_treasury_drift_micro_usdc")).toBe(5)

      yield* sql`UPDATE payments SET status = 'settled' WHERE subject_id = ${requestId}`
      yield* sql`UPDATE executions SET state = ${was!.state}, machine_snapshot = ${JSON.stringify(was!.machineSnapshot)}::jsonb WHERE id = ${requestId}`
      yield* sql`UPDATE agents SET circuit_state = 'closed' WHERE id = ${agentId}`
      yield* sql`INSERT INTO treasury_reconciliations (block_number, chain_balance, ledger_balance, drift, kind, confirmed)
                 VALUES (2, 1000000, 1000000, 0, 'check', false)`
      const calmAgain = yield* families
      for (const kind of ["settlement_retrying", "execution_overdue", "circuit_open"]) {
        expect(valueOf(calmAgain, "marketplace_attention", { kind }), kind).toBe(base(kind))
      }
      expect(valueOf(calmAgain, "marketplace_attention", { kind: "reconciliation_drift" })).toBe(0)
      expect(valueOf(calmAgain, "marketplace_treasury_drift_micro_usdc")).toBe(0)
    }))

  it.scoped("on devnet without METRICS_TOKEN the scrape is open and answers Prometheus text", () =>
    Effect.gen(function* () {
      const r = yield* scrape()
      expect(r.status).toBe(200)
      expect(r.contentType).toBe("text/plain; version=0.0.4; charset=utf-8")
      expect(r.text).toContain("# TYPE marketplace_http_requests_total counter")
    }))
})

const METRICS_TOKEN = "metrics-token-for-tests-0123"

layer(TestApp({ BACKGROUND_WORKERS: "false", METRICS_TOKEN }), { excludeTestServices: true })("metrics behind METRICS_TOKEN", (it) => {
  it.scoped("without the bearer token or with a wrong one the scrape is refused with the envelope, and nothing is leaked", () =>
    Effect.gen(function* () {
      for (const headers of [{}, { authorization: "Bearer wrong-token-for-tests-0123" }, { authorization: METRICS_TOKEN }]) {
        const r = yield* scrape(headers)
        expect(r.status).toBe(401)
        expect(JSON.parse(r.text)).toMatchObject({ success: false, error: { code: "METRICS_AUTH_REQUIRED" } })
        expect(r.text).not.toContain("marketplace_")
      }
      const ok = yield* scrape({ authorization: `Bearer ${METRICS_TOKEN}` })
      expect(ok.status).toBe(200)
      expect(ok.text).toContain("marketplace_http_requests_total")
    }))
})
