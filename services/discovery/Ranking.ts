// The ranking's numbers in one place: how much a query word counts where it is found, how rarer words weigh more, and
// how relevance, reputation and health combine into composite_score. The SQL in Repo.ts receives them as parameters
// (the field weights and the standing step are also written into migrations/0011_discovery.sql).

/**
 * A query word found in the agent's name counts 1; in a capability id or name 0.8; in a tag 0.6; in the agent's or a
 * capability's description 0.4. Stored per (word, agent) in `agent_terms.weight` by the indexing trigger.
 */
export const FIELD_WEIGHTS = { name: 1, capabilities: 0.8, tags: 0.6, description: 0.4 } as const

/** A word found only through one of its synonyms counts this much of the field's weight. */
export const SYNONYM_FACTOR = 0.8

/** composite_score = relevance·0.6 + (reputation/100)·0.25 + health·0.15, each term in 0..1. */
export const COMPOSITE_WEIGHTS = { relevance: 0.6, reputation: 0.25, health: 0.15 } as const

/**
 * How much a query word weighs in relevance: ln(1 + candidates / candidates having it), so a word that tells agents
 * apart counts more than one most candidates share; a word no candidate has weighs ln 2.
 */
export const wordWeight = (candidates: number, having: number) => (having === 0 ? Math.LN2 : Math.log(1 + candidates / having))

/**
 * Relevance (the match score, 0..1) of one agent: the mean of the best field each query word is found in (0 when it is
 * not), weighted by the words' weights. Mirrors the SQL in Repo.ts.
 */
export const relevance = (words: ReadonlyArray<{ readonly field: number; readonly weight: number }>) => {
  const total = words.reduce((sum, w) => sum + w.weight, 0)
  return total === 0 ? 0 : words.reduce((sum, w) => sum + w.weight * w.field, 0) / total
}

export const compositeScore = (relevanceScore: number, reputation: number, health: number) =>
  COMPOSITE_WEIGHTS.relevance * relevanceScore + COMPOSITE_WEIGHTS.reputation * (reputation / 100) + COMPOSITE_WEIGHTS.health * health

/**
 * The order postings are read in (`agent_terms.rank`): the field's share of composite_score plus the standing share
 * rounded down to steps of 0.02, so an execution rewrites an agent's postings only when its standing crosses a step.
 */
export const STANDING_STEP = 0.02
export const postingRank = (field: number, reputation: number, health: number) =>
  COMPOSITE_WEIGHTS.relevance * field +
  Math.floor((COMPOSITE_WEIGHTS.reputation * reputation / 100 + COMPOSITE_WEIGHTS.health * health) / STANDING_STEP) * STANDING_STEP

/** Scores on the wire: 4 decimals. */
export const roundScore = (score: number) => Math.round(score * 10_000) / 10_000
