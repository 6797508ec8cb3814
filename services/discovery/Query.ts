// Turns any text a buyer types into search terms: words of letters and digits (so nothing reaches PostgreSQL's
// text-search parser as syntax), request filler dropped, synonyms and British/American spellings as alternatives.
import { FILLER, PHRASES, SYNONYMS } from "./synonyms.js"

/** Only the start of a long text is read, and only this many distinct words count. */
export const MAX_QUERY_CHARS = 1_000
export const MAX_QUERY_WORDS = 12
/** Longer "words" cannot be in any agent's text (the lexicon keeps words of at most 40 letters). */
const MAX_WORD_CHARS = 40

/** A typed word (corrected when it is not in the lexicon), its other spelling, or a synonym (which counts less). */
export type WordKind = "typed" | "variant" | "synonym"

/**
 * The query's words as parallel arrays for SQL: `groups[i]` is the query word `words[i]` stands for (alternatives of
 * one word share a group) and `kinds[i]` what it is to that word.
 */
export interface SearchTerms {
  readonly words: ReadonlyArray<string>
  readonly groups: ReadonlyArray<number>
  readonly kinds: ReadonlyArray<WordKind>
}

const WORD = /[\p{L}\p{N}]+/gu

/** British and American spellings: summarise/summarize, analyse/analyze, organisation/organization. */
const spellingVariants = (word: string): ReadonlyArray<string> => {
  const variants: Array<string> = []
  const ise = /^(.{3,})is(e|ed|es|ing|ation|ations|er|ers)$/u.exec(word)
  if (ise !== null) variants.push(`${ise[1]}iz${ise[2]}`)
  const ize = /^(.{3,})iz(e|ed|es|ing|ation|ations|er|ers)$/u.exec(word)
  if (ize !== null) variants.push(`${ize[1]}is${ize[2]}`)
  const yse = /^(.{2,})ys(e|ed|es|ing)$/u.exec(word)
  if (yse !== null) variants.push(`${yse[1]}yz${yse[2]}`)
  return variants
}

/** Synonyms of a word or of its singular ("pictures" finds what "picture" finds). */
const synonymsOf = (word: string): ReadonlyArray<string> => {
  for (const form of [word, word.replace(/es$/u, ""), word.replace(/s$/u, "")]) {
    const found = SYNONYMS.get(form)
    if (found !== undefined) return [...found]
  }
  return []
}

const normalise = (text: string) => text.slice(0, MAX_QUERY_CHARS).toWellFormed().normalize("NFKC").toLowerCase()

/** The words of a text, lower case, after phrase rewrites; ill-formed Unicode and control characters are separators. */
export const words = (text: string): ReadonlyArray<string> => {
  let normalised = normalise(text)
  for (const [pattern, replacement] of PHRASES) normalised = normalised.replace(pattern, replacement)
  return normalised.match(WORD) ?? []
}

/** Request filler dropped, unless that leaves nothing. */
const meaningful = (all: ReadonlyArray<string>) => {
  const kept = all.filter((w) => !FILLER.has(w))
  return kept.length > 0 ? kept : all
}

export const parseQuery = (text: string): SearchTerms => {
  const typed = meaningful([...new Set(words(text).filter((w) => [...w].length <= MAX_WORD_CHARS))]).slice(0, MAX_QUERY_WORDS)
  const out = { words: [] as Array<string>, groups: [] as Array<number>, kinds: [] as Array<WordKind> }
  typed.forEach((word, group) => {
    const seen = new Set<string>()
    const push = (alternative: string, kind: WordKind) => {
      if (seen.has(alternative)) return
      seen.add(alternative)
      out.words.push(alternative)
      out.groups.push(group)
      out.kinds.push(kind)
    }
    const variants = spellingVariants(word)
    push(word, "typed")
    for (const variant of variants) push(variant, "variant")
    for (const synonym of [word, ...variants].flatMap(synonymsOf)) push(synonym, "synonym")
  })
  return out
}

/** True when a text has nothing to search for (only punctuation, emoji, spaces). */
export const isEmptyQuery = (terms: SearchTerms) => terms.words.length === 0
