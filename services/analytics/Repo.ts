// Analytics in SQL: platform counts and volume, daily series over generate_series (days without activity are rows of
// zeros), the earnings leaderboard and one agent's figures. Money is what completed executions whose escrow is held or
// released paid (their price, the platform's fee and cut, the agent's earnings): the ledger's escrow transfers of the
// same executions carry the same amounts.
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"

const DAY_MS = 24 * 60 * 60 * 1000

/** UTC calendar day of a time, as YYYY-MM-DD. */
export const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10)
/** The first of `days` UTC days ending today. */
export const firstDay = (now: number, days: number) => utcDay(now - (days - 1) * DAY_MS)

const PlatformRow = Schema.Struct({
  agentsTotal: Schema.Number,
  agentsActive: Schema.Number,
  agentsNew7: Schema.Number,
  txTotal: Schema.Number,
  txCompleted: Schema.Number,
  tx24h: Schema.Number,
  tx7d: Schema.Number,
  gmv: Schema.BigInt,
  gmv24h: Schema.BigInt,
  gmv7d: Schema.BigInt
})

const DayRow = Schema.Struct({
  date: Schema.String,
  total: Schema.Number,
  completed: Schema.Number,
  gmv: Schema.BigInt,
  revenue: Schema.BigInt,
  registered: Schema.Number
})

const AgentDayRow = Schema.Struct({
  date: Schema.String,
  executions: Schema.Number,
  completed: Schema.Number,
  revenue: Schema.BigInt,
  avgMs: Schema.NullOr(Schema.Number)
})

const AgentTotalsRow = Schema.Struct({
  executions: Schema.Number,
  completed: Schema.Number,
  finished: Schema.Number,
  avgMs: Schema.NullOr(Schema.Number),
  revenue: Schema.BigInt,
  platformCompleted: Schema.Number,
  platformFinished: Schema.Number,
  platformAvgMs: Schema.NullOr(Schema.Number),
  agentsBelow: Schema.Number,
  agentsWithExecutions: Schema.Number
})

const BoardRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  reputationScore: Schema.Number,
  executionCount: Schema.Number,
  totalEarned: Schema.BigInt
})

export type BoardSort = "executions" | "revenue" | "reputation"

export class AnalyticsRepo extends Effect.Service<AnalyticsRepo>()("analytics/AnalyticsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** A completed execution that was paid for and not refunded. */
    const paid = sql`e.status = 'completed' AND s.status IN ('held', 'released')`

    const platform = (now: number) => {
      const day = new Date(now - DAY_MS)
      const week = new Date(now - 7 * DAY_MS)
      return sql`
        SELECT
          (SELECT count(*) FROM agents WHERE status <> 'pending')::int AS agents_total,
          (SELECT count(*) FROM agents WHERE status = 'active')::int AS agents_active,
          (SELECT count(*) FROM agents WHERE status <> 'pending' AND created_at >= ${week})::int AS agents_new7,
          count(e.id)::int AS tx_total,
          (count(e.id) FILTER (WHERE e.status = 'completed'))::int AS tx_completed,
          (count(e.id) FILTER (WHERE e.created_at >= ${day}))::int AS tx24h,
          (count(e.id) FILTER (WHERE e.created_at >= ${week}))::int AS tx7d,
          (coalesce(sum(e.price) FILTER (WHERE ${paid}), 0))::text AS gmv,
          (coalesce(sum(e.price) FILTER (WHERE ${paid} AND e.created_at >= ${day}), 0))::text AS gmv24h,
          (coalesce(sum(e.price) FILTER (WHERE ${paid} AND e.created_at >= ${week}), 0))::text AS gmv7d
        FROM executions e LEFT JOIN escrows s ON s.execution_id = e.id`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(PlatformRow))),
        Effect.map((rows) => rows[0]),
        Effect.flatMap(Effect.fromNullable),
        Effect.orDie,
        Effect.withSpan("AnalyticsRepo.platform")
      )
    }

    /** One row per UTC day from `from` to `to` (inclusive): executions, paid volume, platform take, registrations. */
    const days = (from: string, to: string) =>
      sql`
        SELECT to_char(d.day, 'YYYY-MM-DD') AS date,
               coalesce(x.total, 0)::int AS total, coalesce(x.completed, 0)::int AS completed,
               coalesce(x.gmv, 0)::text AS gmv, coalesce(x.revenue, 0)::text AS revenue,
               coalesce(r.registered, 0)::int AS registered
        FROM generate_series(${from}::date::timestamp, ${to}::date::timestamp, interval '1 day') AS d(day)
        LEFT JOIN LATERAL (
          SELECT count(*) AS total, count(*) FILTER (WHERE e.status = 'completed') AS completed,
                 sum(e.price) FILTER (WHERE ${paid}) AS gmv,
                 sum(e.platform_fee + e.platform_cut) FILTER (WHERE ${paid}) AS revenue
          FROM executions e LEFT JOIN escrows s ON s.execution_id = e.id
          WHERE e.created_at >= d.day AT TIME ZONE 'UTC' AND e.created_at < (d.day + interval '1 day') AT TIME ZONE 'UTC'
        ) AS x ON true
        LEFT JOIN LATERAL (
          SELECT count(*) AS registered FROM agents a
          WHERE a.status <> 'pending' AND a.created_at >= d.day AT TIME ZONE 'UTC' AND a.created_at < (d.day + interval '1 day') AT TIME ZONE 'UTC'
        ) AS r ON true
        ORDER BY d.day`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(DayRow))),
        Effect.orDie,
        Effect.withSpan("AnalyticsRepo.days")
      )

    /** One agent's executions per UTC day: count, completed, its paid earnings, mean execution time. */
    const agentDays = (agentId: string, from: string, to: string) =>
      sql`
        SELECT to_char(d.day, 'YYYY-MM-DD') AS date,
               coalesce(x.executions, 0)::int AS executions, coalesce(x.completed, 0)::int AS completed,
               coalesce(x.revenue, 0)::text AS revenue, round(x.avg_ms::numeric, 1)::float8 AS avg_ms
        FROM generate_series(${from}::date::timestamp, ${to}::date::timestamp, interval '1 day') AS d(day)
        LEFT JOIN LATERAL (
          SELECT count(*) AS executions, count(*) FILTER (WHERE e.status = 'completed') AS completed,
                 sum(e.agent_earnings) FILTER (WHERE ${paid}) AS revenue, avg(e.execution_time_ms) AS avg_ms
          FROM executions e LEFT JOIN escrows s ON s.execution_id = e.id
          WHERE e.agent_id = ${agentId}
            AND e.created_at >= d.day AT TIME ZONE 'UTC' AND e.created_at < (d.day + interval '1 day') AT TIME ZONE 'UTC'
        ) AS x ON true
        ORDER BY d.day`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(AgentDayRow))),
        Effect.orDie,
        Effect.withSpan("AnalyticsRepo.agentDays")
      )

    /**
     * One agent's lifetime figures next to the platform's: success among finished executions (pending ones excluded),
     * mean execution time, paid earnings, and how many agents with executions completed fewer than it.
     */
    const agentTotals = (agentId: string) =>
      sql`
        WITH per_agent AS (
          SELECT e.agent_id, count(*) FILTER (WHERE e.status = 'completed') AS completed
          FROM executions e GROUP BY e.agent_id
        ),
        mine AS (
          SELECT count(*)::int AS executions,
                 (count(*) FILTER (WHERE e.status = 'completed'))::int AS completed,
                 (count(*) FILTER (WHERE e.status <> 'pending'))::int AS finished,
                 round(avg(e.execution_time_ms)::numeric, 1)::float8 AS avg_ms,
                 (coalesce(sum(e.agent_earnings) FILTER (WHERE ${paid}), 0))::text AS revenue
          FROM executions e LEFT JOIN escrows s ON s.execution_id = e.id WHERE e.agent_id = ${agentId}
        ),
        everyone AS (
          SELECT (count(*) FILTER (WHERE status = 'completed'))::int AS platform_completed,
                 (count(*) FILTER (WHERE status <> 'pending'))::int AS platform_finished,
                 round(avg(execution_time_ms)::numeric, 1)::float8 AS platform_avg_ms
          FROM executions
        )
        SELECT mine.*, everyone.*,
               (SELECT count(*) FROM per_agent WHERE per_agent.completed < mine.completed)::int AS agents_below,
               (SELECT count(*) FROM per_agent)::int AS agents_with_executions
        FROM mine, everyone`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(AgentTotalsRow))),
        Effect.map((rows) => rows[0]),
        Effect.flatMap(Effect.fromNullable),
        Effect.orDie,
        Effect.withSpan("AnalyticsRepo.agentTotals")
      )

    /** Active agents by executions received, by earnings released to them (the ledger's escrow releases), or by score. */
    const leaderboard = (sort: BoardSort, limit: number) => {
      const order = sort === "executions"
        ? sql`execution_count DESC, total_earned DESC, a.id`
        : sort === "revenue"
        ? sql`total_earned DESC, execution_count DESC, a.id`
        : sql`a.reputation_score DESC, a.health_score DESC, a.id`
      return sql`
        WITH counts AS (SELECT agent_id, count(*) AS n FROM executions GROUP BY agent_id),
        earned AS (
          SELECT t.agent_id, -sum(e.amount) AS total
          FROM ledger_transfers t JOIN ledger_entries e ON e.transfer_id = t.id
          WHERE t.kind = 'escrow_release' AND e.account_id = 'agent:' || t.agent_id || ':available'
          GROUP BY t.agent_id
        )
        SELECT a.id, a.name, a.reputation_score, coalesce(c.n, 0)::int AS execution_count, coalesce(r.total, 0)::text AS total_earned
        FROM agents a LEFT JOIN counts c ON c.agent_id = a.id LEFT JOIN earned r ON r.agent_id = a.id
        WHERE a.status = 'active'
        ORDER BY ${order} LIMIT ${limit}`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(BoardRow))),
        Effect.orDie,
        Effect.withSpan("AnalyticsRepo.leaderboard")
      )
    }

    return { platform, days, agentDays, agentTotals, leaderboard } as const
  })
}) {}
