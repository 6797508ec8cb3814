// Discovery's pure parts: query parsing (words, filler, spellings, synonyms, hostile text), the ranking formulas, the
// ranking metrics, literal LIKE patterns and the strict query-parameter schemas.
import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { isEmptyQuery, MAX_QUERY_WORDS, parseQuery, words } from "../../services/discovery/Query.js"
import {
  compositeScore,
  COMPOSITE_WEIGHTS,
  postingRank,
  relevance,
  roundScore,
  STANDING_STEP,
  wordWeight
} from "../../services/discovery/Ranking.js"
import { containsPattern, narrows } from "../../services/discovery/Repo.js"
import { DiscoverParams, SearchParams } from "../../src/domain/Discovery.js"
import { mean, ndcgAt, precisionAt1 } from "../fixtures/catalogue/metrics.js"

const groupsOf = (text: string) => {
  const terms = parseQuery(text)
  const groups = new Map<number, Array<string>>()
  terms.words.forEach((word, i) => groups.set(terms.groups[i]!, [...(groups.get(terms.groups[i]!) ?? []), `${terms.kinds[i]}:${word}`]))
  return [...groups.values()]
}

describe("query parsing", () => {
  it("splits on anything that is not a letter or digit, so no text-search syntax survives", () => {
    expect(words("translate & | ! ( ) :* <-> \"x\" 'y'")).toEqual(["translate", "x", "y"])
    expect(words("'; DROP TABLE agents; --")).toEqual(["drop", "table", "agents"])
    expect(words("%_%\\ a\u0000b")).toEqual(["a", "b"])
    expect(words("🦄🔥 !!!")).toEqual([])
    expect(isEmptyQuery(parseQuery("🦄🔥 !!! %_"))).toBe(true)
  })

  it("keeps letters of every script and normalises width and case", () => {
    expect(words("ترجمة نص")).toEqual(["ترجمة", "نص"])
    expect(words("日本語 翻訳")).toEqual(["日本語", "翻訳"])
    expect(words("ＴＲＡＮＳＬＡＴＥ")).toEqual(["translate"])
    expect(words("\u202Etranslate\u202C")).toEqual(["translate"])
  })

  it("bounds the work: only the first 1,000 characters and 12 distinct words count", () => {
    expect(parseQuery("a".repeat(10_000)).words).toEqual([])
    expect(new Set(parseQuery("translate ".repeat(1_000)).groups).size).toBe(1)
    const many = Array.from({ length: 40 }, (_, i) => `word${String.fromCharCode(97 + (i % 26))}${i}`).join(" ")
    expect(new Set(parseQuery(many).groups).size).toBe(MAX_QUERY_WORDS)
  })

  it("drops request filler unless nothing else is left", () => {
    expect(groupsOf("I need an agent that can translate").map((g) => g[0])).toEqual(["typed:an", "typed:that", "typed:translate"])
    expect(groupsOf("agent")).toEqual([["typed:agent"]])
  })

  it("adds British/American spellings and synonyms as alternatives of the same word", () => {
    const [summarise] = groupsOf("summarise")
    expect(summarise).toEqual(expect.arrayContaining(["typed:summarise", "variant:summarize", "synonym:summary", "synonym:tldr"]))
    expect(groupsOf("tl;dr")[0]).toEqual(expect.arrayContaining(["typed:tldr", "synonym:summarize"]))
    expect(groupsOf("pictures")[0]).toEqual(expect.arrayContaining(["typed:pictures", "synonym:image"]))
    // Broader terms only one way: rain is weather, weather is not rain.
    expect(groupsOf("rain")[0]).toEqual(expect.arrayContaining(["synonym:weather"]))
    expect(groupsOf("weather")[0]).toEqual(["typed:weather"])
  })
})

describe("ranking", () => {
  it("composite_score is relevance 0.6, reputation 0.25 and health 0.15, each in 0..1", () => {
    expect(COMPOSITE_WEIGHTS.relevance + COMPOSITE_WEIGHTS.reputation + COMPOSITE_WEIGHTS.health).toBeCloseTo(1)
    expect(compositeScore(1, 100, 1)).toBeCloseTo(1)
    expect(compositeScore(0, 0, 0)).toBe(0)
    expect(compositeScore(0.8, 60, 0.9)).toBeCloseTo(0.48 + 0.15 + 0.135)
  })

  it("of two equally relevant agents the better-reputed, healthier one ranks first", () => {
    expect(compositeScore(0.8, 90, 0.99)).toBeGreaterThan(compositeScore(0.8, 60, 0.99))
    expect(compositeScore(0.8, 70, 0.99)).toBeGreaterThan(compositeScore(0.8, 70, 0.5))
    // ...but standing does not beat a much better text match.
    expect(compositeScore(1, 40, 0.8)).toBeGreaterThan(compositeScore(0.4, 100, 1))
  })

  it("relevance is the weighted mean of each word's best field; rarer words weigh more", () => {
    expect(relevance([])).toBe(0)
    expect(relevance([{ field: 1, weight: 1 }])).toBe(1)
    expect(relevance([{ field: 1, weight: 1 }, { field: 0, weight: 1 }])).toBe(0.5)
    expect(wordWeight(100, 2)).toBeGreaterThan(wordWeight(100, 90))
    expect(wordWeight(100, 0)).toBe(Math.LN2)
    // Matching the rare word counts more than matching the common one.
    const rare = wordWeight(100, 2)
    const common = wordWeight(100, 90)
    expect(relevance([{ field: 1, weight: rare }, { field: 0, weight: common }]))
      .toBeGreaterThan(relevance([{ field: 0, weight: rare }, { field: 1, weight: common }]))
  })

  it("postings are read in (field, standing) order, the standing in steps of 0.02", () => {
    expect(postingRank(1, 100, 1)).toBeCloseTo(1)
    expect(postingRank(1, 50, 1)).toBeCloseTo(0.6 + 0.26)
    // One more reputation point moves the standing by 0.0025: the rank changes only when it crosses a step.
    expect(postingRank(0.8, 60, 0.9)).toBe(postingRank(0.8, 61, 0.9))
    expect(STANDING_STEP).toBe(0.02)
  })

  it("scores go on the wire with 4 decimals", () => {
    expect(roundScore(0.123456)).toBe(0.1235)
  })
})

describe("ranking metrics", () => {
  const grades = { a: 2, b: 1, c: 1 } as const
  it("nDCG@5 is 1 for the ideal order and less for a worse one", () => {
    expect(ndcgAt(["a", "b", "c"], grades, 5)).toBeCloseTo(1)
    expect(ndcgAt(["b", "a", "c"], grades, 5)).toBeLessThan(1)
    expect(ndcgAt(["x", "y"], grades, 5)).toBe(0)
    expect(ndcgAt([], {}, 5)).toBe(1)
  })
  it("precision@1 counts a relevant first result", () => {
    expect(precisionAt1(["b"], grades)).toBe(1)
    expect(precisionAt1(["b"], grades, 2)).toBe(0)
    expect(precisionAt1([], grades)).toBe(0)
    expect(mean([1, 0])).toBe(0.5)
  })
})

describe("filters", () => {
  it("capability substrings are literal: %, _ and \\ are escaped", () => {
    expect(containsPattern("50%_off\\")).toBe("%50\\%\\_off\\\\%")
  })
  it("only filters beyond the default health floor count as narrowing", () => {
    expect(narrows({ minHealth: 0.3, chainable: false })).toBe(false)
    expect(narrows({ minHealth: 0, chainable: false })).toBe(false)
    expect(narrows({ minHealth: 0.3, chainable: true })).toBe(true)
    expect(narrows({ minHealth: 0.3, chainable: false, maxPrice: 10n })).toBe(true)
  })
})

describe("query parameters", () => {
  const discover = Schema.decodeUnknownEither(DiscoverParams)
  it("decodes valid values exactly", () => {
    expect(discover({ limit: "50", offset: "0", minReputation: "80.5", minHealth: "0", maxPrice: "0.0005", tags: " Weather ,finance", chainable: "true", sort: "price" }))
      .toEqual(Either.right({ limit: 50, offset: 0, minReputation: 80.5, minHealth: 0, maxPrice: 500n, tags: ["weather", "finance"], chainable: "true", sort: "price" }))
  })
  it("refuses rather than coerces", () => {
    for (const bad of [
      { limit: "0" }, { limit: "51" }, { limit: "1.5" }, { limit: "1e1" }, { limit: " 10" }, { limit: "" }, { offset: "-1" },
      { minReputation: "101" }, { minReputation: "NaN" }, { minHealth: "1.01" }, { minHealth: "Infinity" }, { maxPrice: "-1" },
      { chainable: "1" }, { sort: "health" }, { tags: "a,,b" }, { q: "" }, { q: "   " }, { q: "x".repeat(10_001) }
    ]) {
      expect(Either.isLeft(discover(bad)), JSON.stringify(bad)).toBe(true)
    }
  })
  it("search needs a query; minScore is 0-1", () => {
    const search = Schema.decodeUnknownEither(SearchParams)
    expect(Either.isLeft(search({}))).toBe(true)
    expect(Either.isLeft(search({ query: "x", minScore: "1.5" }))).toBe(true)
    expect(search({ query: "x", minScore: "0.5" })).toEqual(Either.right({ query: "x", minScore: 0.5 }))
  })
})
