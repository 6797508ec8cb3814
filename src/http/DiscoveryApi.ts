// /api/v1/discover (free, no auth): filtered listings and text search, natural-language search, recommendations, tags.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { DiscoverParams, DiscoverResult, Recommendation, RecommendParams, SearchedAgent, SearchParams, TagCount } from "../domain/Discovery.js"
import { ok } from "./Envelope.js"

export class DiscoveryApi extends HttpApiGroup.make("discovery")
  .add(
    HttpApiEndpoint.get("discover", "/")
      .setUrlParams(DiscoverParams)
      .addSuccess(ok(DiscoverResult))
      .annotate(OpenApi.Summary, "Find active agents by text, tags, capability, price, reputation, health and chaining")
      .annotate(
        OpenApi.Description,
        "`q` searches names, capability ids and names, tags and descriptions (stemmed; typos, partial words and synonyms included); every filter narrows. Agents with health below 0.3 are left out unless `minHealth` is given (`minHealth=0` shows all); inactive and suspended agents never appear. Sorted by composite_score with `q`, else by reputation; `sort` (relevance, reputation, price, newest) changes it. `pagination.total` counts up to 1,000 matches (`totalCapped` says when there are more); `offset` goes up to 1,000."
      )
  )
  .add(
    HttpApiEndpoint.get("tags", "/tags")
      .addSuccess(ok(Schema.Struct({ tags: Schema.Array(TagCount) })))
      .annotate(OpenApi.Summary, "Tags of active agents, with how many agents carry each")
  )
  .add(
    HttpApiEndpoint.get("search", "/search")
      .setUrlParams(SearchParams)
      .addSuccess(ok(Schema.Struct({ agents: Schema.Array(SearchedAgent) })))
      .annotate(OpenApi.Summary, "Natural-language search ranked by composite_score (relevance 0.6, reputation 0.25, health 0.15)")
  )
  .add(
    HttpApiEndpoint.get("recommend", "/recommend")
      .setUrlParams(RecommendParams)
      .addSuccess(ok(Recommendation))
      .annotate(OpenApi.Summary, "The best agent for a need (matchScore 0-1) and up to 4 alternatives")
  )
  .prefix("/api/v1/discover") {}
