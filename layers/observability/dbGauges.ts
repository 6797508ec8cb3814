// Gauges read from PostgreSQL when /metrics is scraped (true across every server process, so exported by one: the
// holder of the cluster gauges' lease): settlement backlog, refunds pending, webhook queue and dead letters, open
// circuits, database connections, the needs-attention counts, the treasury's drift and the channels (channelGauges.ts). Bounded statements, briefly cached.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Effect, Schema } from "effect"
import { Gauge, Registry } from "prom-client"
import { ATTENTION_KINDS, type AttentionCounts, attentionCounts } from "../../services/operator/attentionQueries.js"
import { type ChannelReading, makeChannelGauges, readChannels } from "./channelGauges.js"

/** Counts stop here: the query stays bounded however large a backlog grows (the gauge then reads "at least"). */
export const COUNT_CAP = 100_000

const Snapshot = Schema.Struct({
  settlementReserved: Schema.Number,
  settlementRetrying: Schema.Number,
  settlementOldestSeconds: Schema.NullOr(Schema.Number),
  refundsPending: Schema.Number,
  refundsSubmitted: Schema.Number,
  refundsOldestSeconds: Schema.NullOr(Schema.Number),
  webhookPending: Schema.Number,
  webhookOverdue: Schema.Number,
  deadLetters: Schema.Number,
  circuitsOpen: Schema.Number,
  circuitsHalfOpen: Schema.Number
})
type Snapshot = typeof Snapshot.Type
const Connections = Schema.Array(Schema.Struct({ state: Schema.String, n: Schema.Number }))

interface Reading {
  readonly snapshot: Snapshot
  readonly connections: typeof Connections.Type
  readonly attention: AttentionCounts
  /** The newest reconciliation check's drift when confirmed, else 0. */
  readonly drift: bigint
  readonly channels: ChannelReading
}

/**
 * Every count reads at most COUNT_CAP rows through the partial indexes of the unfinished rows (payments_unfinished,
 * refunds_unfinished, webhook_deliveries_due); dead letters and circuits scan small tables.
 */
const read = (sql: SqlClient.SqlClient) =>
  Effect.all({
    snapshot: sql`
      WITH backlog AS (SELECT status, created_at FROM payments WHERE status IN ('reserved', 'retrying') LIMIT ${COUNT_CAP}),
        refunding AS (SELECT status, created_at FROM refunds WHERE status IN ('pending', 'submitted') LIMIT ${COUNT_CAP}),
        queue AS (SELECT next_attempt_at FROM webhook_deliveries WHERE status = 'pending' LIMIT ${COUNT_CAP})
      SELECT
        (SELECT count(*) FILTER (WHERE status = 'reserved') FROM backlog)::int AS settlement_reserved,
        (SELECT count(*) FILTER (WHERE status = 'retrying') FROM backlog)::int AS settlement_retrying,
        (SELECT extract(epoch FROM now() - min(created_at)) FROM backlog)::float8 AS settlement_oldest_seconds,
        (SELECT count(*) FILTER (WHERE status = 'pending') FROM refunding)::int AS refunds_pending,
        (SELECT count(*) FILTER (WHERE status = 'submitted') FROM refunding)::int AS refunds_submitted,
        (SELECT extract(epoch FROM now() - min(created_at)) FROM refunding)::float8 AS refunds_oldest_seconds,
        (SELECT count(*) FROM queue)::int AS webhook_pending,
        (SELECT count(*) FILTER (WHERE next_attempt_at <= now()) FROM queue)::int AS webhook_overdue,
        (SELECT count(*) FROM (SELECT 1 FROM webhook_dead_letters WHERE requeued_at IS NULL LIMIT ${COUNT_CAP}) d)::int AS dead_letters,
        (SELECT count(*) FILTER (WHERE circuit_state = 'open') FROM agents WHERE circuit_state <> 'closed')::int AS circuits_open,
        (SELECT count(*) FILTER (WHERE circuit_state = 'half-open') FROM agents WHERE circuit_state <> 'closed')::int AS circuits_half_open`.pipe(
      Effect.flatMap(([row]) => Schema.decodeUnknown(Snapshot)(row))
    ),
    // Connections the service (every process: same application_name) holds on this database, by state.
    connections: sql`
      SELECT coalesce(state, 'unknown') AS state, count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = current_setting('application_name')
      GROUP BY 1`.pipe(Effect.flatMap(Schema.decodeUnknown(Connections))),
    // The console's own queries (services/operator/attentionQueries.ts): an alert fires on the facts the console lists.
    attention: Effect.flatMap(Clock.currentTimeMillis, (now) => attentionCounts(sql, new Date(now))),
    // Each network's newest check (one row with one network), summed.
    drift: sql<{ drift: string | null }>`SELECT sum(CASE WHEN confirmed THEN drift ELSE 0 END)::text AS drift FROM (
                 SELECT DISTINCT ON (network) confirmed, drift FROM treasury_reconciliations WHERE kind = 'check' ORDER BY network, id DESC) t`.pipe(Effect.map((r) => BigInt(r[0]?.drift ?? "0"))),
    channels: readChannels(sql)
  }, { concurrency: 3 })

const cacheMs = Config.integer("METRICS_DB_CACHE_MS").pipe(
  Config.withDefault(5_000),
  Config.validate({ message: "METRICS_DB_CACHE_MS must be between 0 and 300000", validation: (n) => n >= 0 && n <= 300_000 })
)
const poolSize = Config.integer("DATABASE_POOL_SIZE").pipe(Config.withDefault(20))

/** The lease under which one instance exports the cluster-wide database gauges. */
export const CLUSTER_GAUGES_LEASE = "metrics.cluster-gauges"

/**
 * The gauges of one server: `registry` the cluster-wide ones, refreshed from the database at most every
 * METRICS_DB_CACHE_MS; `local` this instance's own (`marketplace_db_pool_max`, `marketplace_cluster_gauges_exporter`),
 * labelled with `instance`.
 */
export const makeDbGauges = (instance: string) => Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const ttl = yield* cacheMs
  const maxConnections = yield* poolSize
  const registry = new Registry()
  const local = new Registry()
  local.setDefaultLabels({ instance })
  const gauge = <L extends string>(name: string, help: string, labelNames: ReadonlyArray<L> = []) =>
    new Gauge<L>({ name, help, labelNames, registers: [registry] })

  const up = gauge("marketplace_db_metrics_up", "1 when the database gauges below were read at this scrape (or within METRICS_DB_CACHE_MS), 0 when the database did not answer")
  const age = gauge("marketplace_db_metrics_age_seconds", "How old the database gauges below are at this scrape: seconds since they were last read (reused for METRICS_DB_CACHE_MS, kept while the database does not answer)")
  const backlog = gauge("marketplace_settlement_backlog", `Accepted payments not settled yet, by settlement state (capped at ${COUNT_CAP})`, ["state"])
  const backlogAge = gauge("marketplace_settlement_backlog_oldest_seconds", "Age of the oldest payment not settled yet (0 when none)")
  const refunds = gauge("marketplace_refunds_pending", `Refunds not confirmed on chain yet, by state (capped at ${COUNT_CAP})`, ["state"])
  const refundsAge = gauge("marketplace_refunds_pending_oldest_seconds", "Age of the oldest refund not confirmed yet (0 when none)")
  const queue = gauge("marketplace_webhook_queue_depth", `Webhook deliveries waiting for their next attempt (capped at ${COUNT_CAP})`)
  const overdue = gauge("marketplace_webhook_queue_overdue", "Webhook deliveries whose next attempt is already due")
  const dead = gauge("marketplace_webhook_dead_letters", "Dead-lettered webhook deliveries not requeued")
  const circuits = gauge("marketplace_circuits", "Agents whose circuit is not closed, by state (open, half-open)", ["state"])
  const connections = gauge("marketplace_db_connections", "Connections the service's processes hold on its database, by state (pg_stat_activity)", ["state"])
  const attention = gauge(
    "marketplace_attention",
    "Actors that need an operator's attention, by kind of trouble (the counts of the console's needs-attention list)",
    ["kind"]
  )
  const drift = gauge(
    "marketplace_treasury_drift_micro_usdc",
    "The newest reconciliation's confirmed drift, chain minus ledger treasury balance in micro-USDC (0 when they agree)"
  )
  const channels = makeChannelGauges(registry)
  const poolMax = new Gauge({ name: "marketplace_db_pool_max", help: "DATABASE_POOL_SIZE of this process", registers: [local] })
  poolMax.set(maxConnections)
  const exporter = new Gauge({
    name: "marketplace_cluster_gauges_exporter",
    help: "1 on the one instance that exports the cluster-wide gauges (it holds their lease), 0 on the others",
    registers: [local]
  })

  const apply = (r: Reading) => {
    const s = r.snapshot
    backlog.set({ state: "reserved" }, s.settlementReserved)
    backlog.set({ state: "retrying" }, s.settlementRetrying)
    backlogAge.set(s.settlementOldestSeconds ?? 0)
    refunds.set({ state: "pending" }, s.refundsPending)
    refunds.set({ state: "submitted" }, s.refundsSubmitted)
    refundsAge.set(s.refundsOldestSeconds ?? 0)
    queue.set(s.webhookPending)
    overdue.set(s.webhookOverdue)
    dead.set(s.deadLetters)
    circuits.set({ state: "open" }, s.circuitsOpen)
    circuits.set({ state: "half-open" }, s.circuitsHalfOpen)
    for (const kind of ATTENTION_KINDS) attention.set({ kind }, r.attention[kind])
    drift.set(Number(r.drift))
    channels.apply(r.channels)
    connections.reset()
    for (const c of r.connections) connections.set({ state: c.state }, c.n)
  }

  const lock = yield* Effect.makeSemaphore(1)
  let lastAt: number | undefined
  let readAt: number | undefined
  /**
   * Reads the database unless a reading younger than the cache is in force (a failure is remembered as long: a database
   * that does not answer is not asked again at every scrape). After a failure the gauges keep their last values and
   * marketplace_db_metrics_up says 0.
   */
  const refresh = lock.withPermits(1)(
    Effect.suspend(() => {
      const now = Date.now()
      if (lastAt !== undefined && now - lastAt < ttl) return Effect.void
      return read(sql).pipe(
        Effect.timeout("3 seconds"),
        Effect.map((reading) => {
          apply(reading)
          up.set(1)
          lastAt = Date.now()
          readAt = lastAt
        }),
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.sync(() => {
              up.set(0)
              lastAt = Date.now()
            }),
            Effect.logDebug("metrics: the database gauges could not be read", cause)
          ))
      )
    }).pipe(Effect.ensuring(Effect.sync(() => readAt !== undefined && age.set((Date.now() - readAt) / 1_000))))
  )

  /** Whether this instance exports the cluster-wide gauges (set as their lease comes and goes). */
  const exporting = (on: boolean) => Effect.sync(() => exporter.set(on ? 1 : 0))

  return { registry, local, refresh, exporting } as const
})
