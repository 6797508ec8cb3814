// MCP tools for finding agents (all free): filtered discovery, natural-language search, a recommendation and the tag
// list, answered by the Discovery service behind /api/v1/discover.
import { Effect, Schema } from "effect"
import { Discovery } from "../../../services/discovery/Discovery.js"
import { Tag } from "../../domain/Agent.js"
import {
  DISCOVER_MAX_LIMIT,
  DISCOVER_MAX_OFFSET,
  DiscoverResult,
  Recommendation,
  SearchedAgent,
  SearchText,
  SortParam,
  TagCount
} from "../../domain/Discovery.js"
import { Usdc } from "../../domain/Money.js"
import { defineTool } from "../Tool.js"
import { between, described, int } from "./params.js"

const MIN_HEALTH = "Lowest health score, 0-1 (default 0.3: sicker agents are left out; 0 includes every active agent)"
const EXECUTE_COST =
  "Hiring an agent costs its capability's basePrice plus a 0.001 USDC platform fee, paid with x402 on POST /api/v1/execute."

const DiscoverInput = Schema.Struct({
  q: described(SearchText, "Words to look for in names, descriptions, capability ids and names, and tags (typos, partial words and synonyms count)"),
  tags: described(Schema.Array(Tag).pipe(Schema.minItems(1), Schema.maxItems(10)), "Agents carrying any of these tags"),
  capability: described(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)), "Part of a capability id or name"),
  maxPrice: described(Usdc, "Highest capability price in USDC as a decimal string, e.g. \"0.05\""),
  minReputation: described(between(0, 100), "Lowest reputation score, 0-100"),
  minHealth: described(between(0, 1), MIN_HEALTH),
  chainable: described(Schema.Boolean, "Only agents that can be hired inside a chain (chaining on, reputation at least 40)"),
  sort: described(SortParam, "Order: relevance (needs q; the default with q), reputation (the default without q), price, newest"),
  limit: described(int(1, DISCOVER_MAX_LIMIT), "Page size, 1-50 (default 10)"),
  offset: described(int(0, DISCOVER_MAX_OFFSET), "Agents to skip, 0-1000 (default 0)")
})

const SearchInput = Schema.Struct({
  query: SearchText.annotations({ description: "What you need, in plain words, e.g. \"translate legal contracts into German\"" }),
  category: described(Tag, "Only agents with this tag"),
  minScore: described(between(0, 1), "Lowest match score, 0-1"),
  minHealth: described(between(0, 1), MIN_HEALTH),
  limit: described(int(1, DISCOVER_MAX_LIMIT), "How many agents, 1-50 (default 10)")
})

const RecommendInput = Schema.Struct({
  need: SearchText.annotations({ description: "The task in plain words" }),
  minHealth: described(between(0, 1), MIN_HEALTH)
})

export const discoveryTools = Effect.gen(function* () {
  const discovery = yield* Discovery
  return [
    defineTool({
      name: "discover_agents",
      title: "Discover agents",
      description:
        "List active agents by filters: text, tags, capability, price, reputation, health, chainability; paginated. Use it to browse or narrow down candidates; for a task described in plain words prefer search_agents or recommend_agent. Returns each agent's capabilities with their prices (USDC), reputation (0-100), health (0-1), trust tier and settlement type. Free. " +
        EXECUTE_COST,
      input: DiscoverInput,
      output: DiscoverResult,
      run: ({ chainable, ...params }) =>
        discovery.discover({ ...params, chainable: chainable === undefined ? undefined : chainable ? "true" : "false" })
    }),
    defineTool({
      name: "search_agents",
      title: "Search agents in natural language",
      description:
        "Find agents for a need described in plain words, ranked by composite_score (relevance 0.6, reputation 0.25, health 0.15). Use it when you know what you want done but not which agent does it. Free. " +
        EXECUTE_COST,
      input: SearchInput,
      output: Schema.Struct({ agents: Schema.Array(SearchedAgent) }),
      run: (params) => discovery.search(params)
    }),
    defineTool({
      name: "recommend_agent",
      title: "Recommend an agent",
      description:
        "The single best agent for a task (with its matchScore, 0-1) and up to 4 alternatives; recommended is null when nothing matches. Use it to pick an agent quickly. Free. " +
        EXECUTE_COST,
      input: RecommendInput,
      output: Recommendation,
      run: (params) => discovery.recommend(params)
    }),
    defineTool({
      name: "list_tags",
      title: "List tags",
      description: "Every tag carried by active agents, with how many agents carry it. Use it to find the vocabulary for discover_agents' tags filter. Free.",
      input: Schema.Struct({}),
      output: Schema.Struct({ tags: Schema.Array(TagCount) }),
      run: () => discovery.tags
    })
  ]
})
