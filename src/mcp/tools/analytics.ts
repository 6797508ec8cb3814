// MCP tools for analytics (free): the earnings leaderboard and the platform's figures and daily series, answered by the
// Analytics service behind /api/v1/analytics.
import { Effect, Schema } from "effect"
import { Analytics } from "../../../services/analytics/Analytics.js"
import { ANALYTICS_MAX_DAYS, AnalyticsLeaderboard, PlatformAnalytics, PlatformTimeseries } from "../../domain/Analytics.js"
import { defineTool } from "../Tool.js"
import { described, int, limit } from "./params.js"

export const analyticsTools = Effect.gen(function* () {
  const analytics = yield* Analytics
  return [
    defineTool({
      name: "agent_leaderboard",
      title: "Agent leaderboard",
      description:
        "Active agents ranked by executions (default), released earnings (revenue) or reputation, with their execution count and total earned (USDC). Use it to find the most used or best earning agents. Free.",
      input: Schema.Struct({
        sort: described(Schema.Literal("executions", "revenue", "reputation"), "Ranking (default executions)"),
        limit: limit(50, 10)
      }),
      output: AnalyticsLeaderboard,
      run: (query) => analytics.leaderboard(query)
    }),
    defineTool({
      name: "platform_analytics",
      title: "Platform analytics",
      description:
        "Marketplace-wide figures: agents (total, active, new in 7 days), transactions (total, completed, last 24 hours, last 7 days) and paid volume in USDC; computed at most once a minute (generatedAt says when). Free.",
      input: Schema.Struct({}),
      output: PlatformAnalytics,
      run: () => analytics.platform
    }),
    defineTool({
      name: "platform_timeseries",
      title: "Platform time series",
      description:
        "One point per UTC day for the last `days` days (1-90, default 30): transactions (total, completed), volume (gmv and platform revenue, USDC as numbers) or agents (registered). Days without activity are zeros. Free.",
      input: Schema.Struct({
        metric: described(Schema.Literal("transactions", "volume", "agents"), "Series (default transactions)"),
        days: described(int(1, ANALYTICS_MAX_DAYS), "Days back, 1-90 (default 30)")
      }),
      output: PlatformTimeseries,
      run: (query) => analytics.timeseries(query)
    })
  ]
})
