// Platform statistics for operators: the analytics figures (computed now, not cached) and the fees collected, read from
// the ledger's platform revenue account (in total, by kind of transfer, and by UTC day with the day's executions).
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import { formatUsdc } from "../../src/domain/Money.js"
import { AnalyticsRepo, firstDay, utcDay } from "../analytics/Repo.js"
import { Accounts } from "../ledger/Ledger.js"
import { rowsOf } from "../sql/Rows.js"

const KindRow = Schema.Struct({ kind: Schema.String, amount: Schema.BigInt })
const byKind = rowsOf(KindRow)
const FeeDay = Schema.Struct({ date: Schema.String, amount: Schema.BigInt })
const feeDays = rowsOf(FeeDay)
const StatusRow = Schema.Struct({ status: Schema.String, count: Schema.Number })
const statuses = rowsOf(StatusRow)

export class OperatorStats extends Effect.Service<OperatorStats>()("operator/OperatorStats", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const analytics = yield* AnalyticsRepo

    /**
     * Fees are what the platform revenue account was credited (registration fees, execution fees and cuts at release,
     * withdrawal fees), net of what it gave back (a withdrawal that failed returns its fee, a dispute takes back the
     * platform's part): the account's balance, never a figure recomputed from executions.
     */
    const stats = (days: number) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const from = firstDay(now, days)
        const to = utcDay(now)
        const [platform, kinds, perDay, activity, agentStatuses] = yield* Effect.all([
          analytics.platform(now),
          byKind(sql`
            SELECT t.kind, (-sum(e.amount))::text AS amount
            FROM ledger_entries e JOIN ledger_transfers t ON t.id = e.transfer_id
            WHERE e.account_id = ${Accounts.platformRevenue} GROUP BY t.kind ORDER BY t.kind`),
          feeDays(sql`
            SELECT d.day::date::text AS date, coalesce(x.amount, 0)::text AS amount
            FROM generate_series(${from}::date::timestamp, ${to}::date::timestamp, interval '1 day') AS d(day)
            LEFT JOIN LATERAL (
              SELECT -sum(e.amount) AS amount FROM ledger_entries e
              WHERE e.account_id = ${Accounts.platformRevenue}
                AND e.created_at >= d.day AT TIME ZONE 'UTC' AND e.created_at < (d.day + interval '1 day') AT TIME ZONE 'UTC'
            ) x ON true ORDER BY d.day`),
          analytics.days(from, to),
          statuses(sql`SELECT status, count(*)::int AS count FROM agents WHERE status <> 'pending' GROUP BY status`)
        ], { concurrency: 4 }).pipe(Effect.orDie)
        const total = kinds.reduce((sum, k) => sum + k.amount, 0n)
        const day = new Map(activity.map((a) => [a.date, a]))
        return {
          generatedAt: new Date(now).toISOString(),
          agents: {
            total: platform.agentsTotal,
            active: platform.agentsActive,
            suspended: agentStatuses.find((s) => s.status === "suspended")?.count ?? 0,
            inactive: agentStatuses.find((s) => s.status === "inactive")?.count ?? 0,
            newLast7Days: platform.agentsNew7
          },
          transactions: { total: platform.txTotal, completed: platform.txCompleted, last24Hours: platform.tx24h, last7Days: platform.tx7d },
          volume: { totalGMV: formatUsdc(platform.gmv), gmvLast24Hours: formatUsdc(platform.gmv24h), gmvLast7Days: formatUsdc(platform.gmv7d) },
          fees: {
            total: formatUsdc(total),
            byKind: kinds.map((k) => ({ kind: k.kind, amount: formatUsdc(k.amount) })),
            days,
            byDay: perDay.map((d) => ({
              date: d.date,
              fees: formatUsdc(d.amount),
              executions: day.get(d.date)?.total ?? 0,
              completed: day.get(d.date)?.completed ?? 0,
              gmv: formatUsdc(day.get(d.date)?.gmv ?? 0n)
            }))
          }
        }
      }).pipe(Effect.withSpan("OperatorStats.stats"))

    return { stats } as const
  }),
  dependencies: [AnalyticsRepo.Default]
}) {}
