// Handlers of /api/v1/analytics and /api/v1/reputation: decode, call the service, wrap in the envelope.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { proofsFromHeaders } from "../../layers/x402/credential.js"
import { Analytics } from "../../services/analytics/Analytics.js"
import { ReputationBoard } from "../../services/reputation/Board.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const AnalyticsHttpLive = HttpApiBuilder.group(Api, "analytics", (handlers) =>
  Effect.map(Analytics, (analytics) =>
    handlers
      .handle("platform", () => Effect.map(analytics.platform, respond))
      .handle("platformTimeseries", ({ urlParams }) => Effect.map(analytics.timeseries(urlParams), respond))
      .handle("leaderboard", ({ urlParams }) => Effect.map(analytics.leaderboard(urlParams), respond))
      .handle("agent", ({ headers, path }) => Effect.map(analytics.agent(path.agentId, headers), respond))
      .handle("agentTimeseries", ({ headers, path, urlParams }) =>
        Effect.map(analytics.agentTimeseries(path.agentId, headers, urlParams.days), respond))
      .handle("agentAlias", ({ headers, path }) => Effect.map(analytics.agent(path.agentId, headers), respond))))

export const ReputationHttpLive = HttpApiBuilder.group(Api, "reputation", (handlers) =>
  Effect.map(ReputationBoard, (board) =>
    handlers
      .handle("leaderboard", ({ urlParams }) => Effect.map(board.leaderboard(urlParams.limit), respond))
      .handle("rate", ({ headers, payload }) => Effect.map(board.rate(payload, proofsFromHeaders(headers)), respond))
      .handle("profile", ({ path }) => Effect.map(board.profile(path.agentId), respond))
      .handle("events", ({ path, urlParams }) => Effect.map(board.history(path.agentId, urlParams.limit, urlParams.offset), respond))))
