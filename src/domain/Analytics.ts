// Analytics on the wire (spec section 4): platform figures, daily time series, the earnings leaderboard and an agent's
// own analytics; strictly validated query parameters.
import { Schema } from "effect"
import { integer, Limit } from "./Discovery.js"

export const ANALYTICS_DEFAULT_DAYS = 30
export const ANALYTICS_MAX_DAYS = 90

export const Days = integer(1, ANALYTICS_MAX_DAYS)

export const TimeseriesQuery = Schema.Struct({
  metric: Schema.optional(Schema.Literal("transactions", "volume", "agents")),
  days: Schema.optional(Days)
}).annotations({ parseOptions: { errors: "all" } })
export type TimeseriesQuery = typeof TimeseriesQuery.Type

export const DaysQuery = Schema.Struct({ days: Schema.optional(Days) }).annotations({ parseOptions: { errors: "all" } })

export const AnalyticsLeaderboardQuery = Schema.Struct({
  sort: Schema.optional(Schema.Literal("executions", "revenue", "reputation")),
  limit: Schema.optional(Limit(50))
}).annotations({ parseOptions: { errors: "all" } })
export type AnalyticsLeaderboardQuery = typeof AnalyticsLeaderboardQuery.Type

export const PlatformAnalytics = Schema.Struct({
  agents: Schema.Struct({ total: Schema.Number, active: Schema.Number, newLast7Days: Schema.Number }),
  transactions: Schema.Struct({ total: Schema.Number, completed: Schema.Number, last24Hours: Schema.Number, last7Days: Schema.Number }),
  volume: Schema.Struct({ totalGMV: Schema.String, gmvLast24Hours: Schema.String, gmvLast7Days: Schema.String }),
  generatedAt: Schema.String
}).annotations({ identifier: "PlatformAnalytics" })
export type PlatformAnalytics = typeof PlatformAnalytics.Type

const TransactionsPoint = Schema.Struct({ date: Schema.String, total: Schema.Number, completed: Schema.Number })
const VolumePoint = Schema.Struct({ date: Schema.String, gmv: Schema.Number, revenue: Schema.Number })
const AgentsPoint = Schema.Struct({ date: Schema.String, registered: Schema.Number })

export const PlatformTimeseries = Schema.Union(
  Schema.Struct({ metric: Schema.Literal("transactions"), days: Schema.Number, data: Schema.Array(TransactionsPoint) }),
  Schema.Struct({ metric: Schema.Literal("volume"), days: Schema.Number, data: Schema.Array(VolumePoint) }),
  Schema.Struct({ metric: Schema.Literal("agents"), days: Schema.Number, data: Schema.Array(AgentsPoint) })
)
export type PlatformTimeseries = typeof PlatformTimeseries.Type

export const AnalyticsLeaderboard = Schema.Struct({
  sortBy: Schema.Literal("executions", "revenue", "reputation"),
  agents: Schema.Array(Schema.Struct({
    rank: Schema.Number,
    id: Schema.String,
    name: Schema.String,
    reputation_score: Schema.Number,
    execution_count: Schema.Number,
    totalEarned: Schema.String
  }))
})

export const AgentDay = Schema.Struct({
  date: Schema.String,
  executions: Schema.Number,
  completed: Schema.Number,
  revenue: Schema.String,
  avgResponseTimeMs: Schema.NullOr(Schema.Number)
})

export const AgentAnalytics = Schema.Struct({
  executionCount: Schema.Number,
  successRate: Schema.NullOr(Schema.Number),
  avgResponseTimeMs: Schema.NullOr(Schema.Number),
  totalRevenue: Schema.String,
  periodStart: Schema.String,
  periodEnd: Schema.String,
  timeSeries: Schema.Array(AgentDay),
  platformComparison: Schema.Struct({
    avgSuccessRate: Schema.NullOr(Schema.Number),
    avgResponseTimeMs: Schema.NullOr(Schema.Number),
    percentileRank: Schema.NullOr(Schema.Number)
  })
}).annotations({ identifier: "AgentAnalytics" })

export const AgentTimeseries = Schema.Struct({
  agentId: Schema.String,
  days: Schema.Number,
  data: Schema.Array(Schema.Struct({
    date: Schema.String,
    executions: Schema.Number,
    completed: Schema.Number,
    revenue: Schema.String,
    avgResponseTime: Schema.NullOr(Schema.Number)
  }))
})
