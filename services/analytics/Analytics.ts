// Analytics (free reads): platform figures (cached for ANALYTICS_CACHE_SECONDS, 60 by default), daily time series, the
// earnings leaderboard, and an agent's own analytics for its owner only (wallet signature; a read, so reusable for its
// 5 minutes).
import { Clock, Config, Effect, Option } from "effect"
import {
  ANALYTICS_DEFAULT_DAYS,
  type AnalyticsLeaderboardQuery,
  type PlatformAnalytics,
  type PlatformTimeseries,
  type TimeseriesQuery
} from "../../src/domain/Analytics.js"
import { NotFound } from "../../src/domain/Errors.js"
import type { AgentId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Agents } from "../agents/Agents.js"
import { verifyWalletSignature, type WalletAuthHeaders } from "../agents/WalletAuth.js"
import { cachedFor } from "./cache.js"
import { AnalyticsRepo, firstDay, utcDay } from "./Repo.js"

/** USDC as a JSON number (the spec's time series); exact for any amount below 9 billion USDC. */
const usdcNumber = (micros: bigint) => Number(micros) / 1_000_000

const ratio = (part: number, whole: number) => (whole === 0 ? null : Math.round((part / whole) * 10_000) / 10_000)

export class Analytics extends Effect.Service<Analytics>()("analytics/Analytics", {
  scoped: Effect.gen(function* () {
    const repo = yield* AnalyticsRepo
    const agents = yield* Agents
    const cacheSeconds = yield* Config.integer("ANALYTICS_CACHE_SECONDS").pipe(Config.withDefault(60), Effect.orDie)

    const computePlatform = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const row = yield* repo.platform(now)
      return {
        agents: { total: row.agentsTotal, active: row.agentsActive, newLast7Days: row.agentsNew7 },
        transactions: { total: row.txTotal, completed: row.txCompleted, last24Hours: row.tx24h, last7Days: row.tx7d },
        volume: { totalGMV: formatUsdc(row.gmv), gmvLast24Hours: formatUsdc(row.gmv24h), gmvLast7Days: formatUsdc(row.gmv7d) },
        generatedAt: new Date(now).toISOString()
      } satisfies PlatformAnalytics
    })
    const platform = (yield* cachedFor(cacheSeconds * 1000, computePlatform)).pipe(Effect.withSpan("Analytics.platform"))

    const timeseries = (query: TimeseriesQuery) =>
      Effect.gen(function* () {
        const days = query.days ?? ANALYTICS_DEFAULT_DAYS
        const now = yield* Clock.currentTimeMillis
        const rows = yield* repo.days(firstDay(now, days), utcDay(now))
        switch (query.metric ?? "transactions") {
          case "transactions":
            return { metric: "transactions" as const, days, data: rows.map((r) => ({ date: r.date, total: r.total, completed: r.completed })) }
          case "volume":
            return { metric: "volume" as const, days, data: rows.map((r) => ({ date: r.date, gmv: usdcNumber(r.gmv), revenue: usdcNumber(r.revenue) })) }
          case "agents":
            return { metric: "agents" as const, days, data: rows.map((r) => ({ date: r.date, registered: r.registered })) }
        }
      }).pipe(Effect.map((series): PlatformTimeseries => series), Effect.withSpan("Analytics.timeseries"))

    const leaderboard = (query: AnalyticsLeaderboardQuery) =>
      Effect.gen(function* () {
        const sort = query.sort ?? "executions"
        const rows = yield* repo.leaderboard(sort, query.limit ?? 10)
        return {
          sortBy: sort,
          agents: rows.map((row, i) => ({
            rank: i + 1,
            id: row.id,
            name: row.name,
            reputation_score: row.reputationScore,
            execution_count: row.executionCount,
            totalEarned: formatUsdc(row.totalEarned)
          }))
        }
      }).pipe(Effect.withSpan("Analytics.leaderboard"))

    /** The agent's owner proves it with its wallet signature; a read, so the signature is not used up (5 minutes). */
    const owner = (agentId: AgentId, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const record = yield* agents.loadRecord(agentId)
        if (Option.isNone(record) || record.value.status === "pending") {
          return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
        }
        yield* verifyWalletSignature(record.value, auth)
        return record.value
      })

    const agentSeries = (agentId: AgentId, days: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => repo.agentDays(agentId, firstDay(now, days), utcDay(now)))

    /**
     * Lifetime figures since registration (periodStart) and the last 30 days day by day. totalRevenue is the agent's
     * earnings from paid, completed executions: the balance's totalEarned plus its pending.
     */
    const agent = (agentId: AgentId, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const record = yield* owner(agentId, auth)
        const now = yield* Clock.currentTimeMillis
        const totals = yield* repo.agentTotals(agentId)
        const series = yield* agentSeries(agentId, ANALYTICS_DEFAULT_DAYS)
        return {
          executionCount: totals.executions,
          successRate: ratio(totals.completed, totals.finished),
          avgResponseTimeMs: totals.avgMs,
          totalRevenue: formatUsdc(totals.revenue),
          periodStart: record.createdAt.toISOString(),
          periodEnd: new Date(now).toISOString(),
          timeSeries: series.map((d) => ({
            date: d.date,
            executions: d.executions,
            completed: d.completed,
            revenue: formatUsdc(d.revenue),
            avgResponseTimeMs: d.avgMs
          })),
          platformComparison: {
            avgSuccessRate: ratio(totals.platformCompleted, totals.platformFinished),
            avgResponseTimeMs: totals.platformAvgMs,
            percentileRank: totals.agentsWithExecutions === 0 || totals.executions === 0
              ? null
              : Math.round((100 * totals.agentsBelow) / totals.agentsWithExecutions)
          }
        }
      }).pipe(Effect.withSpan("Analytics.agent"))

    const agentTimeseries = (agentId: AgentId, auth: WalletAuthHeaders, days = ANALYTICS_DEFAULT_DAYS) =>
      Effect.gen(function* () {
        yield* owner(agentId, auth)
        const series = yield* agentSeries(agentId, days)
        return {
          agentId,
          days,
          data: series.map((d) => ({
            date: d.date,
            executions: d.executions,
            completed: d.completed,
            revenue: formatUsdc(d.revenue),
            avgResponseTime: d.avgMs
          }))
        }
      }).pipe(Effect.withSpan("Analytics.agentTimeseries"))

    return { platform, timeseries, leaderboard, agent, agentTimeseries } as const
  }),
  dependencies: [AnalyticsRepo.Default, Agents.Default]
}) {}
