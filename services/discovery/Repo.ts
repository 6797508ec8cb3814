// Discovery in PostgreSQL: filtered listings, full-text + trigram relevance with the composite ranking, capped totals,
// and the tag counts. Row schemas for what the views read.
import { SqlClient, type Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import { TrustTier } from "../../src/domain/Agent.js"
import { CapabilitySummary } from "../../src/domain/Discovery.js"
import type { SearchTerms } from "./Query.js"
import { COMPOSITE_WEIGHTS, FIELD_WEIGHTS, PHRASE_BONUS, SYNONYM_FACTOR } from "./Ranking.js"

/** Lexicon words at least this similar (pg_trgm) to a typed word missing from the lexicon stand in for it. */
export const CORRECTION_SIMILARITY = 0.4

/** Totals are counted up to this many matches; beyond it `total` is the cap and `totalCapped` is true. */
export const TOTAL_CAP = 1_000

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

export type Sort = "relevance" | "reputation" | "health" | "price" | "newest"

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

/** The search statement's rows: the page with the total on each, or one row of only the total past the last page. */
const SearchRows = Schema.Array(Schema.Union(
  Schema.extend(DiscoveredRow, Schema.Struct({ total: Schema.Number })),
  Schema.Struct({ id: Schema.Null, total: Schema.Number })
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

const decodeRows = Schema.decodeUnknown(Schema.Array(DiscoveredRow))

export class DiscoveryRepo extends Effect.Service<DiscoveryRepo>()("discovery/DiscoveryRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const empty = sql``

    const filtersSql = (f: Filters): Statement.Fragment => sql`
      a.status = 'active' AND a.health_score >= ${f.minHealth}::float8
      ${f.minReputation === undefined ? empty : sql`AND a.reputation_score >= ${f.minReputation}::float8`}
      ${f.chainable ? sql`AND (a.chain_settings->>'chain_enabled')::boolean AND a.reputation_score >= 40` : empty}
      ${f.tags === undefined ? empty : sql`AND s.tags && ${f.tags}::text[]`}
      ${f.category === undefined ? empty : sql`AND s.tags @> ARRAY[${f.category}]::text[]`}
      ${f.capability === undefined ? empty : sql`AND s.capability_text LIKE ${containsPattern(f.capability)}`}
      ${f.maxPrice === undefined ? empty : sql`AND s.min_price <= ${f.maxPrice.toString()}::bigint`}`

    /** What the views show: the capability summaries only (not their schemas or examples). */
    const columns = sql`a.id, a.name, a.description, a.tags, a.reputation_score, a.health_score, a.trust_tier, a.created_at, s.min_price,
      (SELECT coalesce(jsonb_agg(jsonb_build_object('id', c->'id', 'name', c->'name', 'pricing', c->'pricing')), '[]'::jsonb)
         FROM jsonb_array_elements(a.capabilities) AS c) AS capabilities`

    /** The weight of the best field of a candidate `c` that matches the text-search query `q`. */
    const fieldScore = (q: Statement.Fragment) => sql`CASE
      WHEN c.name_tsv @@ ${q} THEN ${FIELD_WEIGHTS.name}::float8
      WHEN c.capabilities_tsv @@ ${q} THEN ${FIELD_WEIGHTS.capabilities}::float8
      WHEN c.tags_tsv @@ ${q} THEN ${FIELD_WEIGHTS.tags}::float8
      WHEN c.description_tsv @@ ${q} THEN ${FIELD_WEIGHTS.description}::float8
      ELSE 0 END`

    const orderSql = (sort: Sort) => {
      switch (sort) {
        case "relevance":
          return sql`composite DESC, id`
        case "reputation":
          return sql`reputation_score DESC, health_score DESC, id`
        case "health":
          return sql`health_score DESC, reputation_score DESC, id`
        case "price":
          return sql`min_price, reputation_score DESC, id`
        case "newest":
          return sql`created_at DESC, id`
      }
    }

    const page = (rows: ReadonlyArray<DiscoveredRow>, limit: number, counted: number): Page => ({
      rows: rows.slice(0, limit),
      total: Math.min(counted, TOTAL_CAP),
      totalCapped: counted > TOTAL_CAP,
      hasMore: rows.length > limit
    })

    /**
     * Text search: each query word with its alternatives (synonyms, and for typed words missing from the lexicon the
     * closest lexicon words by trigram similarity and their completions) is one OR-group; an agent matches when any
     * group does (GIN on the weighted document), and relevance is the mean of each group's best field weight plus the
     * phrase bonus. Every candidate is scored, then sorted.
     */
    const search = (terms: SearchTerms, f: Filters, sort: Sort, minRelevance: number, limit: number, offset: number) =>
      sql`
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
        alternatives AS (SELECT grp, word, kind FROM input UNION SELECT grp, word, kind FROM corrected),
        grouped AS (
          SELECT grp,
                 coalesce(tsquery_or_agg(plainto_tsquery('english', word)) FILTER (WHERE kind <> 'synonym'), ''::tsquery) AS exact,
                 tsquery_or_agg(plainto_tsquery('english', word)) AS q
          FROM alternatives GROUP BY grp
        ),
        live AS (SELECT grp, exact, q FROM grouped WHERE numnode(q) > 0),
        query AS (
          SELECT tsquery_or_agg(q) AS any_q, count(*)::float8 AS n, phraseto_tsquery('english', ${terms.phrase}) AS phrase_q FROM live
        ),
        candidates AS MATERIALIZED (
          SELECT ${columns}, s.name_tsv, s.capabilities_tsv, s.tags_tsv, s.description_tsv,
                 (numnode(query.phrase_q) > 2 AND s.document @@ query.phrase_q) AS phrase
          FROM query
          JOIN agent_search s ON s.document @@ query.any_q
          JOIN agents a ON a.id = s.agent_id
          WHERE query.n > 0 AND ${filtersSql(f)}
        ),
        -- Where each query word is found in each candidate (the best field); found only through a synonym, it counts less.
        points AS (
          SELECT c.id, l.grp, greatest(${fieldScore(sql`l.exact`)}, ${SYNONYM_FACTOR}::float8 * ${fieldScore(sql`l.q`)}) AS field
          FROM candidates c CROSS JOIN live l
        ),
        -- Rarer words say more about what is wanted: each word weighs ln(1 + candidates / candidates having it); a word no
        -- candidate has tells nothing apart and weighs the least, ln 2.
        weights AS (
          SELECT grp, CASE WHEN count(*) FILTER (WHERE field > 0) = 0 THEN ln(2)
                           ELSE ln(1 + count(*)::float8 / count(*) FILTER (WHERE field > 0)) END AS w
          FROM points GROUP BY grp
        ),
        relevance AS (
          SELECT p.id, sum(w.w * p.field) / sum(w.w) AS points FROM points p JOIN weights w USING (grp) GROUP BY p.id
        ),
        ranked AS MATERIALIZED (
          SELECT id, name, description, tags, reputation_score, health_score, trust_tier, created_at, min_price, capabilities, relevance,
                 ${COMPOSITE_WEIGHTS.relevance}::float8 * relevance + ${COMPOSITE_WEIGHTS.reputation}::float8 * reputation_score / 100.0
                   + ${COMPOSITE_WEIGHTS.health}::float8 * health_score AS composite
          FROM (
            SELECT c.*, least(1.0, r.points + CASE WHEN c.phrase THEN ${PHRASE_BONUS}::float8 ELSE 0 END) AS relevance
            FROM candidates c JOIN relevance r USING (id)
          ) AS scored
          WHERE relevance >= ${minRelevance}::float8
        )
        -- One row even past the last page, so the total is always known.
        SELECT p.*, c.total
        FROM (SELECT count(*)::int AS total FROM ranked) AS c
        LEFT JOIN LATERAL (SELECT * FROM ranked ORDER BY ${orderSql(sort)} LIMIT ${limit + 1} OFFSET ${offset}) AS p ON true`.pipe(
        Effect.flatMap(Schema.decodeUnknown(SearchRows)),
        Effect.map((rows) => page(rows.flatMap((row) => (row.id === null ? [] : [row])), limit, rows[0]?.total ?? 0)),
        Effect.withSpan("DiscoveryRepo.search")
      )

    /** Listing without text: index order for the default sort; the total is a count capped at TOTAL_CAP + 1 rows. */
    const list = (f: Filters, sort: Sort, limit: number, offset: number) =>
      Effect.gen(function* () {
        const rows = yield* sql`
          SELECT ${columns}, 0::float8 AS relevance, 0::float8 AS composite
          FROM agents a JOIN agent_search s ON s.agent_id = a.id WHERE ${filtersSql(f)}
          ORDER BY ${orderSql(sort)} LIMIT ${limit + 1} OFFSET ${offset}`.pipe(Effect.flatMap(decodeRows))
        const [counted] = yield* sql<{ total: number }>`
          SELECT count(*)::int AS total FROM (
            SELECT 1 FROM agents a JOIN agent_search s ON s.agent_id = a.id WHERE ${filtersSql(f)} LIMIT ${TOTAL_CAP + 1}
          ) AS capped`
        return page(rows, limit, counted?.total ?? 0)
      }).pipe(Effect.withSpan("DiscoveryRepo.list"))

    /** Tags of active agents with how many agents carry each, most used first. */
    const tags = sql`
      SELECT t.tag, count(*)::int AS count
      FROM agents a CROSS JOIN LATERAL jsonb_array_elements_text(a.tags) AS t(tag)
      WHERE a.status = 'active'
      GROUP BY t.tag ORDER BY count(*) DESC, t.tag`.pipe(
      Effect.flatMap(Schema.decodeUnknown(Schema.Array(TagRow))),
      Effect.withSpan("DiscoveryRepo.tags")
    )

    return { search, list, tags } as const
  })
}) {}
