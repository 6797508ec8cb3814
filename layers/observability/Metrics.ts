// Per-process metrics (prom-client, labelled with the instance): HTTP requests by route template, executions by status, machine transitions,
// settlement latency, and Node's own process metrics. Gauges read from the database live in dbGauges.ts.
import { Effect } from "effect"
import { collectDefaultMetrics, Counter, Histogram, Registry } from "prom-client"

/**
 * One registry per process: counters and histograms count what this process did (Prometheus sums them across
 * processes). Module-level, so every layer and service records into the same families.
 */
export const processRegistry = new Registry()

/**
 * Cluster-wide series kept in memory (the treasury's gas gauges): registered here only by the instance holding the
 * lease of the job that sets them, so the cluster exports each once; no `instance` label.
 */
export const clusterRegistry = new Registry()

/** Labels every per-process series with this instance's id (layers/cluster/Instance.ts). */
export const labelProcessMetrics = (instance: string) => processRegistry.setDefaultLabels({ instance })

let processMetricsOn = false
/** Node's CPU, memory, GC, event-loop lag and handle counts (`process_*`, `nodejs_*`), registered once per process. */
export const enableProcessMetrics = () => {
  if (processMetricsOn) return
  processMetricsOn = true
  collectDefaultMetrics({ register: processRegistry })
}

export const httpRequests = new Counter({
  name: "marketplace_http_requests_total",
  help: "HTTP requests answered, by method, route template (\"unmatched\" for paths no route serves) and status code",
  labelNames: ["method", "route", "status"] as const,
  registers: [processRegistry]
})

export const httpDuration = new Histogram({
  name: "marketplace_http_request_duration_seconds",
  help: "Time from a request's arrival to its response, by method, route template and status class (2xx, 3xx, 4xx, 5xx)",
  labelNames: ["method", "route", "status_class"] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [processRegistry]
})

export const operatorTokenFailures = new Counter({
  name: "marketplace_operator_token_failures_total",
  help: "Operator-token attempts that failed, by surface (api: Authorization on /api/v1/operator; console: the /ops login) and outcome (refused: a wrong token, counted; locked: a wrong token from an address over its limit)",
  labelNames: ["surface", "outcome"] as const,
  registers: [processRegistry]
})

export const executionsReached = new Counter({
  name: "marketplace_executions_total",
  help: "Executions that reached an API status (completed, failed, timeout, refunded) in this process; a retried execution can count failed, then completed",
  labelNames: ["status"] as const,
  registers: [processRegistry]
})

export const machineTransitions = new Counter({
  name: "marketplace_machine_transitions_total",
  help: "Persisted state-machine transitions saved by this process, by machine and target state (\"completed.held\" for nested states)",
  labelNames: ["machine", "state"] as const,
  registers: [processRegistry]
})

export const settlementDuration = new Histogram({
  name: "marketplace_settlement_duration_seconds",
  help: "One on-chain settlement attempt, from submission to its outcome (settled, failed, or pending: not known yet, retried later)",
  labelNames: ["outcome"] as const,
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
  registers: [processRegistry]
})

/** Times a settlement attempt into `marketplace_settlement_duration_seconds`, labelled by its outcome. */
export const recordSettlement = <A extends { readonly outcome: { readonly _tag: string } }, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const started = performance.now()
    return Effect.tap(self, (settlement) =>
      Effect.sync(() => settlementDuration.observe({ outcome: settlement.outcome._tag.toLowerCase() }, (performance.now() - started) / 1000)))
  })

/**
 * Money that moved, in micro-USDC (integers: exact up to 9e15, i.e. nine billion USDC per process lifetime), by flow:
 * paid (payments that reached the treasury), platform_fee (credited to platform revenue), platform_fee_returned (taken
 * back from it), refunded and paid_out (left the treasury on chain). Counted from the ledger's transfers
 * (services/ledger/flows.ts), in-process: no query.
 */
export const moneyMoved = new Counter({
  name: "marketplace_money_micro_usdc_total",
  help: "Money booked by this process, micro-USDC, by flow: paid (payments settled into the treasury), platform_fee (platform revenue earned), platform_fee_returned (fees given back), refunded and paid_out (sent from the treasury on chain: refunds; withdrawals)",
  labelNames: ["flow"] as const,
  registers: [processRegistry]
})
