// The discovery bench's workloads: deterministic request paths per kind (filters, free text, natural-language search),
// drawn from the ranking fixture's vocabulary.
import { queries } from "../../test/fixtures/catalogue/queries.js"
import { prng } from "./catalogue.js"

/** The measured kinds of request (their targets are in bench/discover.ts). */
export type Kind = "filters" | "text" | "search"

const POPULAR_TAGS = ["translation", "weather", "finance", "images", "nlp", "code", "data", "legal", "speech", "ecommerce", "summarization", "security"]
const WORDS = ["translate", "weather", "invoice", "summarize", "image", "code review", "stock", "speech", "pdf", "sentiment", "fraud", "legal contract", "resume", "ocr", "forecast", "crypto"]

const discoverFilters = (random: () => number): Record<string, string> => {
  const p: Record<string, string> = {}
  if (random() < 0.5) p["tags"] = random() < 0.7 ? pickOne(random, POPULAR_TAGS) : `${pickOne(random, POPULAR_TAGS)},${pickOne(random, POPULAR_TAGS)}`
  if (random() < 0.4) p["maxPrice"] = pickOne(random, ["0.001", "0.005", "0.01", "0.05", "0.5"])
  if (random() < 0.4) p["minReputation"] = pickOne(random, ["40", "60", "70", "80", "90"])
  if (random() < 0.2) p["minHealth"] = pickOne(random, ["0", "0.5", "0.9"])
  if (random() < 0.25) p["chainable"] = "true"
  if (random() < 0.15) p["capability"] = pickOne(random, ["translate", "detect", "extract", "forecast", "summar", "review"])
  p["limit"] = pickOne(random, ["10", "10", "20", "50"])
  p["offset"] = pickOne(random, ["0", "0", "0", "10", "20", "50", "100", "500"])
  return p
}

const pickOne = <A>(random: () => number, items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)] as A

export const discoverWorkload = (kind: Kind, n: number, seed: number): ReadonlyArray<string> => {
  const random = prng(seed)
  return Array.from({ length: n }, () => {
    switch (kind) {
      case "filters":
        return `/api/v1/discover?${new URLSearchParams(discoverFilters(random))}`
      case "text": {
        const p = random() < 0.5 ? discoverFilters(random) : { limit: "10", offset: pickOne(random, ["0", "0", "10", "20"]) }
        return `/api/v1/discover?${new URLSearchParams({ ...p, q: pickOne(random, WORDS) })}`
      }
      case "search":
        return `/api/v1/discover/search?${new URLSearchParams({ query: pickOne(random, queries).query, limit: "10" })}`
    }
  })
}

