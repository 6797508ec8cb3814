// /api/v1/analytics and /api/v1/reputation (free reads; an agent's own analytics need its wallet signature) and
// POST /api/v1/reputation/ratings (a paying client rates a completed execution, proved by its payment header).
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  AgentAnalytics,
  AgentTimeseries,
  AnalyticsLeaderboard,
  AnalyticsLeaderboardQuery,
  DaysQuery,
  PlatformAnalytics,
  PlatformTimeseries,
  TimeseriesQuery
} from "../domain/Analytics.js"
import { ConflictResponse, ForbiddenResponse, UnauthorizedResponse } from "../domain/Errors.js"
import { AgentId } from "../domain/Ids.js"
import {
  EventsPage,
  EventsQuery,
  LeaderboardQuery,
  RatingRecorded,
  RatingRequest,
  ReputationLeaderboard,
  ReputationProfile
} from "../domain/Reputation.js"
import { WalletSignatureHeaders } from "./AgentsApi.js"
import { ok } from "./Envelope.js"
import { PaymentHeaderFields } from "./PaymentHeaders.js"

const AgentPath = Schema.Struct({ agentId: AgentId })
const OWNER_ONLY =
  "Private earnings: needs the agent's wallet signature (X-Agent-Wallet and X-Agent-Signature, spec section 5 format, reusable within its 5 minutes: a read), not only the wallet address."

const agentAnalytics = <const Name extends string>(name: Name, path: `/${string}`) =>
  HttpApiEndpoint.get(name, path)
    .setPath(AgentPath)
    .setHeaders(WalletSignatureHeaders)
    .addSuccess(ok(AgentAnalytics))
    .addError(UnauthorizedResponse)
    .addError(ForbiddenResponse)

export class AnalyticsApi extends HttpApiGroup.make("analytics")
  .add(
    HttpApiEndpoint.get("platform", "/platform")
      .addSuccess(ok(PlatformAnalytics))
      .annotate(OpenApi.Summary, "Platform figures: agents, transactions, paid volume (computed at most once a minute; see generatedAt)")
  )
  .add(
    HttpApiEndpoint.get("platformTimeseries", "/platform/timeseries")
      .setUrlParams(TimeseriesQuery)
      .addSuccess(ok(PlatformTimeseries))
      .annotate(OpenApi.Summary, "One point per UTC day (days 1-90, default 30; days without activity are zeros)")
  )
  .add(
    HttpApiEndpoint.get("leaderboard", "/leaderboard")
      .setUrlParams(AnalyticsLeaderboardQuery)
      .addSuccess(ok(AnalyticsLeaderboard))
      .annotate(OpenApi.Summary, "Active agents by executions, released earnings or reputation")
  )
  .add(agentAnalytics("agent", "/agent/:agentId").annotate(OpenApi.Summary, "An agent's own analytics").annotate(OpenApi.Description, OWNER_ONLY))
  .add(
    HttpApiEndpoint.get("agentTimeseries", "/agent/:agentId/timeseries")
      .setPath(AgentPath)
      .setUrlParams(DaysQuery)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(AgentTimeseries))
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .annotate(OpenApi.Summary, "An agent's executions, earnings and execution time per UTC day")
      .annotate(OpenApi.Description, OWNER_ONLY)
  )
  .prefix("/api/v1/analytics")
  // The spec's alias, outside the prefix.
  .add(
    agentAnalytics("agentAlias", "/api/v1/agents/:agentId/analytics")
      .annotate(OpenApi.Summary, "Alias of GET /api/v1/analytics/agent/:agentId")
      .annotate(OpenApi.Description, OWNER_ONLY)
  ) {}

export class ReputationApi extends HttpApiGroup.make("reputation")
  .add(
    HttpApiEndpoint.get("leaderboard", "/leaderboard")
      .setUrlParams(LeaderboardQuery)
      .addSuccess(ok(ReputationLeaderboard))
      .annotate(OpenApi.Summary, "Active agents by reputation score")
  )
  .add(
    HttpApiEndpoint.post("rate", "/ratings")
      .setPayload(RatingRequest)
      .setHeaders(Schema.Struct(PaymentHeaderFields))
      .addSuccess(ok(RatingRecorded), { status: 201 })
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Rate a completed execution you paid for: 1-5 stars move the agent's score by -2..+2, once")
      .annotate(
        OpenApi.Description,
        "Send the payment header of the original execution (its X-PAYMENT-USED value, in X-PAYMENT or PAYMENT-SIGNATURE) as proof of payment. Only root executions (not calls inside a chain) that completed can be rated, each once."
      )
  )
  .add(
    HttpApiEndpoint.get("profile", "/:agentId")
      .setPath(AgentPath)
      .addSuccess(ok(ReputationProfile))
      .annotate(OpenApi.Summary, "An agent's score, tier by the spec's bands, status and latest events")
  )
  .add(
    HttpApiEndpoint.get("events", "/:agentId/events")
      .setPath(AgentPath)
      .setUrlParams(EventsQuery)
      .addSuccess(ok(EventsPage))
      .annotate(OpenApi.Summary, "An agent's reputation events, newest first (limit 1-100, default 50)")
  )
  .prefix("/api/v1/reputation") {}
