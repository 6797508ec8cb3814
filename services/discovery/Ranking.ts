// The ranking's numbers in one place: how much a query word counts where it is found, the phrase bonus, and how
// relevance, reputation and health combine into composite_score. SQL receives them as parameters.

/** A query word found in the agent's name counts 1; in a capability id or name 0.8; in a tag 0.6; in a description 0.4. */
export const FIELD_WEIGHTS = { name: 1, capabilities: 0.8, tags: 0.6, description: 0.4 } as const

/** A word found only through one of its synonyms counts this much of the field's weight. */
export const SYNONYM_FACTOR = 0.8

/** Added when the query's words appear in the typed order ("text to speech" is not "speech to text"). */
export const PHRASE_BONUS = 0.15

/** composite_score = relevance·0.6 + (reputation/100)·0.25 + health·0.15, each term in 0..1. */
export const COMPOSITE_WEIGHTS = { relevance: 0.6, reputation: 0.25, health: 0.15 } as const

/**
 * Relevance (match score, 0..1): the mean over the query's words of the best field each is found in, plus the phrase
 * bonus, capped at 1. Mirrors the SQL in Repo.ts (kept here for the documentation and its unit test).
 */
export const relevance = (bestFieldPerWord: ReadonlyArray<number>, phrase: boolean) =>
  bestFieldPerWord.length === 0
    ? 0
    : Math.min(1, bestFieldPerWord.reduce((a, b) => a + b, 0) / bestFieldPerWord.length + (phrase ? PHRASE_BONUS : 0))

export const compositeScore = (relevanceScore: number, reputation: number, health: number) =>
  COMPOSITE_WEIGHTS.relevance * relevanceScore + COMPOSITE_WEIGHTS.reputation * (reputation / 100) + COMPOSITE_WEIGHTS.health * health

/** Scores on the wire: 4 decimals. */
export const roundScore = (score: number) => Math.round(score * 10_000) / 10_000
