// Discovery (free, no auth): filtered listings and text search over active agents, natural-language search ranked by
// composite_score, recommendations, and the tag list.
import { Effect } from "effect"
import { BadRequest } from "../../src/domain/Errors.js"
import {
  DEFAULT_MIN_HEALTH,
  DISCOVER_DEFAULT_LIMIT,
  type DiscoverParams,
  type RecommendParams,
  type SearchParams
} from "../../src/domain/Discovery.js"
import { isEmptyQuery, parseQuery } from "./Query.js"
import { DiscoveryRepo, type Filters, type Page, type Sort } from "./Repo.js"
import * as View from "./View.js"

/** How many alternatives follow the recommended agent. */
export const RECOMMEND_ALTERNATIVES = 4

const NOTHING: Page = { rows: [], total: 0, totalCapped: false, hasMore: false }

/** Stored names, ids and tags never contain NUL (registration refuses it): a filter with one matches nothing. */
const impossible = (f: Filters) =>
  [f.capability, f.category, ...(f.tags ?? [])].some((text) => text !== undefined && text.includes("\u0000"))

export class Discovery extends Effect.Service<Discovery>()("discovery/Discovery", {
  effect: Effect.gen(function* () {
    const repo = yield* DiscoveryRepo

    /** Text search when there is text, else the listing; a text without searchable words matches nothing. */
    const find = (text: string | undefined, f: Filters, sort: Sort, minRelevance: number, limit: number, offset: number) => {
      if (impossible(f)) return Effect.succeed(NOTHING)
      if (text === undefined) return repo.list(f, sort, limit, offset)
      const terms = parseQuery(text)
      return isEmptyQuery(terms) ? Effect.succeed(NOTHING) : repo.search(terms, f, sort, minRelevance, limit, offset)
    }

    const discover = (params: DiscoverParams) =>
      Effect.gen(function* () {
        if (params.sort === "relevance" && params.q === undefined) {
          return yield* new BadRequest({
            code: "VALIDATION_ERROR",
            message: "sort=relevance needs q",
            details: { issues: [{ path: "sort", message: "relevance ordering needs a text query (q)" }] }
          })
        }
        const limit = params.limit ?? DISCOVER_DEFAULT_LIMIT
        const offset = params.offset ?? 0
        const filters: Filters = {
          tags: params.tags,
          capability: params.capability?.toLowerCase(),
          maxPrice: params.maxPrice,
          minReputation: params.minReputation,
          minHealth: params.minHealth ?? DEFAULT_MIN_HEALTH,
          chainable: params.chainable === "true"
        }
        const sort = params.sort ?? (params.q === undefined ? "reputation" : "relevance")
        const page = yield* find(params.q, filters, sort, 0, limit, offset)
        return {
          agents: page.rows.map(View.forDiscover),
          pagination: { total: page.total, limit, offset, totalCapped: page.totalCapped, hasMore: page.hasMore }
        }
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("Discovery.discover"))

    /** Natural-language search: agents whose match score reaches minScore, by composite_score. */
    const search = (params: SearchParams) =>
      find(
        params.query,
        { category: params.category, minHealth: params.minHealth ?? DEFAULT_MIN_HEALTH, chainable: false },
        "relevance",
        params.minScore ?? 0,
        params.limit ?? DISCOVER_DEFAULT_LIMIT,
        0
      ).pipe(
        Effect.map((page) => ({ agents: page.rows.map(View.forSearch) })),
        Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }),
        Effect.withSpan("Discovery.search")
      )

    const recommend = (params: RecommendParams) =>
      find(params.need, { minHealth: params.minHealth ?? DEFAULT_MIN_HEALTH, chainable: false }, "relevance", 0, 1 + RECOMMEND_ALTERNATIVES, 0).pipe(
        Effect.map((page) => View.recommendation(page.rows)),
        Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }),
        Effect.withSpan("Discovery.recommend")
      )

    const tags = repo.tags.pipe(
      Effect.map((tags) => ({ tags })),
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }),
      Effect.withSpan("Discovery.tags")
    )

    return { discover, search, recommend, tags } as const
  }),
  dependencies: [DiscoveryRepo.Default]
}) {}
