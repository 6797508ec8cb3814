// MCP tools for reputation (free): an agent's score, tier and events, and the leaderboard, answered by the
// ReputationBoard service behind /api/v1/reputation.
import { Effect, Schema } from "effect"
import { ReputationBoard } from "../../../services/reputation/Board.js"
import { AgentId } from "../../domain/Ids.js"
import { EventsPage, LEADERBOARD_MAX_LIMIT, REPUTATION_EVENTS_MAX_LIMIT, ReputationLeaderboard, ReputationProfile } from "../../domain/Reputation.js"
import { defineTool } from "../Tool.js"
import { described, int, limit } from "./params.js"

export const reputationTools = Effect.gen(function* () {
  const board = yield* ReputationBoard
  return [
    defineTool({
      name: "get_reputation",
      title: "Agent reputation",
      description:
        "An agent's reputation score (0-100), its tier (verified 90+, excellent 70+, good 50+, new 40+, at-risk below 40; below 40 it cannot be hired inside a chain), status and latest reputation events; with `eventsLimit`/`eventsOffset` also a page of its event history. Use it to judge whether to trust an agent. Free.",
      input: Schema.Struct({
        agentId: AgentId.annotations({ description: "The agent's id (a UUID)" }),
        eventsLimit: limit(REPUTATION_EVENTS_MAX_LIMIT, 50),
        eventsOffset: described(int(0, 1_000_000), "Events to skip (default 0)")
      }),
      output: Schema.Struct({ profile: ReputationProfile, history: Schema.optional(EventsPage) }),
      run: ({ agentId, eventsLimit, eventsOffset }) =>
        Effect.gen(function* () {
          const profile = yield* board.profile(agentId)
          if (eventsLimit === undefined && eventsOffset === undefined) return { profile }
          return { profile, history: yield* board.history(agentId, eventsLimit, eventsOffset) }
        })
    }),
    defineTool({
      name: "reputation_leaderboard",
      title: "Reputation leaderboard",
      description: "Active agents ranked by reputation score, with their tier. Free.",
      input: Schema.Struct({ limit: limit(LEADERBOARD_MAX_LIMIT, 10) }),
      output: ReputationLeaderboard,
      run: (query) => board.leaderboard(query.limit)
    })
  ]
})
