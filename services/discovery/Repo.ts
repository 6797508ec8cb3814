// Discovery in PostgreSQL, one statement per request: filtered listings with a capped total over the narrow
// `agent_listing` table, and text search over the postings (`agent_terms`) with the composite ranking (migration 0011).
import { SqlClient, type Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import { TrustTier } from "../../src/domain/Agent.js"
import { CapabilitySummary } from "../../src/domain/Discovery.js"
import type { SearchTerms } from "./Query.js"
import { COMPOSITE_WEIGHTS, SYNONYM_FACTOR } from "./Ranking.js"

/** Lexicon words at least this similar (pg_trgm) to a typed word missing from the lexicon stand in for it. */
export const CORRECTION_SIMILARITY = 0.4

/** Totals are counted up to this many matches; beyond it `total` is the cap and `totalCapped` is true. */
export const TOTAL_CAP = 1_000

/**
 * How many postings of each query word are read, best first (field weight, then standing): the agents scored for a
 * text query. More when filters may drop most of them.
 */
export const POSTINGS_PER_WORD = 200
export const POSTINGS_PER_WORD_FILTERED = 1_000
/** A synonym's stems are read less deeply: they count less. */
export const SYNONYM_POSTINGS_SHARE = 0.3

export interface Filters {
  /** Any of these tags (lower case). */
  readonly tags?: ReadonlyArray<string> | undefined
  /** This tag (the search endpoint's `category`). */
  readonly category?: string | undefined
  /** Substring of a capability id or name (lower case). */
  readonly capability?: string | undefined
  /** The cheapest capability's basePrice at most this (micro-USDC). */
  readonly maxPrice?: bigint | undefined
  readonly minReputation?: number | undefined
  readonly minHealth: number
  /** Chaining enabled and reputation at least 40. */
  readonly chainable: boolean
}

export type Sort = "relevance" | "reputation" | "price" | "newest"

export const DiscoveredRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  tags: Schema.Array(Schema.String),
  capabilities: Schema.Array(CapabilitySummary),
  reputationScore: Schema.Number,
  healthScore: Schema.Number,
  trustTier: TrustTier,
  relevance: Schema.Number,
  composite: Schema.Number
})
export type DiscoveredRow = typeof DiscoveredRow.Type

/** A statement's rows: the page with the total on each, or one row of only the total past the last page. */
const PageRows = Schema.Array(Schema.Union(
  Schema.extend(DiscoveredRow, Schema.Struct({ total: Schema.Number, capped: Schema.Boolean })),
  Schema.Struct({ id: Schema.Null, total: Schema.Number, capped: Schema.Boolean })
))

const TagRow = Schema.Struct({ tag: Schema.String, count: Schema.Number })

export interface Page {
  readonly rows: ReadonlyArray<DiscoveredRow>
  /** Matches counted (at most TOTAL_CAP). */
  readonly total: number
  readonly totalCapped: boolean
  readonly hasMore: boolean
}

/** A LIKE pattern matching `text` literally anywhere (`%`, `_` and `\` are not wildcards). */
export const containsPattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/** Whether any filter beyond the default health floor narrows the set. */
export const narrows = (f: Filters) =>
  f.tags !== undefined || f.category !== undefined || f.capability !== undefined || f.maxPrice !== undefined ||
  f.minReputation !== undefined || f.chainable

export class DiscoveryRepo extends Effect.Service<DiscoveryRepo>()("discovery/DiscoveryRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const empty = sql``

    /** The filters on `agent_listing l`; reputation is a whole number, so a fractional minimum rounds up. */
    const filtersSql = (f: Filters): Statement.Fragment => sql`
      l.status = 'active' AND l.health_score >= ${f.minHealth}::float8
      ${f.minReputation === undefined ? empty : sql`AND l.reputation_score >= ${Math.ceil(f.minReputation)}::int`}
      ${f.chainable ? sql`AND l.chainable AND l.reputation_score >= 40` : empty}
      ${f.tags === undefined ? empty : sql`AND l.tags && ${f.tags}::text[]`}
      ${f.category === undefined ? empty : sql`AND l.tags @> ARRAY[${f.category}]::text[]`}
      ${f.capability === undefined ? empty : sql`AND l.capability_text LIKE ${containsPattern(f.capability)}`}
      ${f.maxPrice === undefined ? empty : sql`AND l.min_price <= ${f.maxPrice.toString()}::bigint`}`

    const orderSql = (sort: Sort, p: string) => {
      const c = (column: string) => sql.unsafe(`${p}.${column}`)
      switch (sort) {
        case "relevance":
          return sql`${c("composite")} DESC, ${c("agent_id")}`
        case "reputation":
          return sql`${c("reputation_score")} DESC, ${c("health_score")} DESC, ${c("agent_id")}`
        case "price":
          return sql`${c("min_price")}, ${c("reputation_score")} DESC, ${c("agent_id")}`
        case "newest":
          return sql`${c("created_at")} DESC, ${c("agent_id")}`
      }
    }

    /** The page `p` (agent_id, reputation_score, health_score, relevance, composite) with what the views show. */
    const shown = (sort: Sort) => sql`
      a.id, a.name, a.description, a.tags, a.trust_tier, p.reputation_score, p.health_score, p.relevance, p.composite,
      (SELECT coalesce(jsonb_agg(jsonb_build_object('id', c->'id', 'name', c->'name', 'pricing', c->'pricing')), '[]'::jsonb)
         FROM jsonb_array_elements(a.capabilities) AS c) AS capabilities,
      t.total, t.capped
      FROM t LEFT JOIN p ON true LEFT JOIN agents a ON a.id = p.agent_id
      ORDER BY ${orderSql(sort, "p")}`

    const decodePage = (limit: number) => (rows: ReadonlyArray<unknown>) =>
      Schema.decodeUnknown(PageRows)(rows).pipe(Effect.map((decoded): Page => {
        const found = decoded.flatMap((row) => (row.id === null ? [] : [row]))
        const total = decoded[0]?.total ?? 0
        return {
          rows: found.slice(0, limit),
          total: Math.min(total, TOTAL_CAP),
          totalCapped: total > TOTAL_CAP || (decoded[0]?.capped ?? false),
          hasMore: found.length > limit
        }
      }))

    /**
     * Text search. Each query word with its alternatives (spellings and synonyms; for a typed word missing from the
     * lexicon its closest lexicon words and completions) is a group of stemmed words. The best postings of each word
     * (field weight, then standing) give the candidates and, per group, the weight of the best field the group is found
     * in (a synonym's counts 0.8 of it). Relevance is the mean of the groups' best fields weighted by how rare each group
     * is among the candidates (ln(1 + candidates / candidates having it)); composite_score adds reputation and health.
     */
    const search = (terms: SearchTerms, f: Filters, sort: Sort, minRelevance: number, limit: number, offset: number) => {
      const perWord = narrows(f) ? POSTINGS_PER_WORD_FILTERED : POSTINGS_PER_WORD
      const perSynonym = Math.ceil(perWord * SYNONYM_POSTINGS_SHARE)
      return sql`
        WITH input AS (
          SELECT * FROM unnest(${terms.words}::text[], ${terms.groups}::int[], ${terms.kinds}::text[]) AS i(word, grp, kind)
        ),
        corrected AS (
          SELECT i.grp, c.term AS word, 'typed' AS kind
          FROM input i
          CROSS JOIN LATERAL (
            (SELECT t.term FROM search_terms t WHERE t.term LIKE i.word || '%' AND t.term <> i.word ORDER BY char_length(t.term), t.term LIMIT 5)
            UNION
            (SELECT t.term FROM search_terms t WHERE t.term % i.word AND similarity(t.term, i.word) >= ${CORRECTION_SIMILARITY}::float8
             ORDER BY similarity(t.term, i.word) DESC, t.term LIMIT 3)
          ) AS c
          -- Only words none of whose alternatives (spellings, synonyms) any agent uses.
          WHERE i.kind = 'typed' AND char_length(i.word) >= 4
            AND NOT EXISTS (SELECT 1 FROM input v JOIN search_terms x ON x.term = v.word WHERE v.grp = i.grp)
        ),
        stems AS (
          SELECT a.grp, s.term, bool_and(a.kind = 'synonym') AS synonym
          FROM (SELECT grp, word, kind FROM input UNION SELECT grp, word, kind FROM corrected) AS a
          CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('english', a.word))) AS s(term)
          GROUP BY a.grp, s.term
        ),
        -- The best postings of each stem; per agent and group the best field (a synonym's counts less).
        read AS MATERIALIZED (
          SELECT s.grp, s.term, p.agent_id, p.weight * CASE WHEN s.synonym THEN ${SYNONYM_FACTOR}::real ELSE 1::real END AS field,
                 count(*) OVER (PARTITION BY s.grp, s.term) AS n
          FROM stems s
          CROSS JOIN LATERAL (
            SELECT t.agent_id, t.weight FROM agent_terms t WHERE t.term = s.term ORDER BY t.rank DESC
            LIMIT CASE WHEN s.synonym THEN ${perSynonym}::int ELSE ${perWord}::int END
          ) AS p
        ),
        hits AS MATERIALIZED (SELECT agent_id, grp, max(field) AS field FROM read GROUP BY agent_id, grp),
        -- One primary-key probe per candidate (LIMIT 1 keeps the planner from hashing the whole listing instead).
        matched AS MATERIALIZED (
          SELECT l.*
          FROM (SELECT DISTINCT agent_id FROM hits) AS h
          CROSS JOIN LATERAL (
            SELECT l.agent_id, l.reputation_score, l.health_score, l.min_price, l.created_at
            FROM agent_listing l WHERE l.agent_id = h.agent_id AND ${filtersSql(f)} LIMIT 1
          ) AS l
        ),
        -- How rare each group is among the candidates read; a group none has weighs the least, ln 2, and still counts.
        weights AS (
          SELECT g.grp, coalesce(ln(1 + (SELECT count(DISTINCT agent_id) FROM hits)::float8 / nullif(df.n, 0)), ln(2)) AS w
          FROM (SELECT DISTINCT grp FROM stems) AS g LEFT JOIN (SELECT grp, count(*) AS n FROM hits GROUP BY grp) AS df USING (grp)
        ),
        scored AS MATERIALIZED (
          SELECT m.agent_id, m.reputation_score, m.health_score, m.min_price, m.created_at, r.relevance,
                 ${COMPOSITE_WEIGHTS.relevance}::float8 * r.relevance + ${COMPOSITE_WEIGHTS.reputation}::float8 * m.reputation_score / 100.0
                   + ${COMPOSITE_WEIGHTS.health}::float8 * m.health_score AS composite
          FROM matched m
          JOIN (
            SELECT h.agent_id, sum(w.w * h.field) / (SELECT sum(w) FROM weights) AS relevance
            FROM hits h JOIN weights w USING (grp) GROUP BY h.agent_id
          ) AS r USING (agent_id)
          WHERE r.relevance >= ${minRelevance}::float8
        ),
        t AS (
          SELECT count(*)::int AS total,
                 coalesce((SELECT bool_or(n >= CASE WHEN s.synonym THEN ${perSynonym}::int ELSE ${perWord}::int END) FROM read JOIN stems s USING (grp, term)), false) AS capped
          FROM scored
        ),
        p AS (SELECT * FROM scored s ORDER BY ${orderSql(sort, "s")} LIMIT ${limit + 1} OFFSET ${offset})
        SELECT ${shown(sort)}`.pipe(
        Effect.flatMap(decodePage(limit)),
        Effect.withSpan("DiscoveryRepo.search")
      )
    }

    /**
     * Listing without text. Up to TOTAL_CAP + 1 matches are collected once: they are the total, and when that is all of
     * them the page is sorted from them; only when more match is the page read in index order (where matches are dense
     * enough to be found at once) - so a filter matching few or no agents never walks the whole index.
     */
    const list = (f: Filters, sort: Sort, limit: number, offset: number) =>
      sql`
        WITH matched AS MATERIALIZED (
          SELECT l.agent_id, l.reputation_score, l.health_score, l.min_price, l.created_at, 0::float8 AS relevance, 0::float8 AS composite
          FROM agent_listing l WHERE ${filtersSql(f)} LIMIT ${TOTAL_CAP + 1}
        ),
        t AS (SELECT count(*)::int AS total, false AS capped FROM matched),
        p AS (
          (SELECT m.* FROM matched m WHERE (SELECT total FROM t) <= ${TOTAL_CAP}
           ORDER BY ${orderSql(sort, "m")} LIMIT ${limit + 1} OFFSET ${offset})
          UNION ALL
          (SELECT l.agent_id, l.reputation_score, l.health_score, l.min_price, l.created_at, 0::float8, 0::float8
           FROM agent_listing l WHERE (SELECT total FROM t) > ${TOTAL_CAP} AND ${filtersSql(f)}
           ORDER BY ${orderSql(sort, "l")} LIMIT ${limit + 1} OFFSET ${offset})
        )
        SELECT ${shown(sort)}`.pipe(
        Effect.flatMap(decodePage(limit)),
        Effect.withSpan("DiscoveryRepo.list")
      )

    /** Tags of active agents with how many agents carry each, most used first. */
    const tags = sql`
      SELECT t.tag, count(*)::int AS count
      FROM agent_listing l CROSS JOIN LATERAL unnest(l.tags) AS t(tag)
      WHERE l.status = 'active'
      GROUP BY t.tag ORDER BY count(*) DESC, t.tag`.pipe(
      Effect.flatMap(Schema.decodeUnknown(Schema.Array(TagRow))),
      Effect.withSpan("DiscoveryRepo.tags")
    )

    return { search, list, tags } as const
  })
}) {}
