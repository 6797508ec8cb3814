// A short cache of dynamic capabilities' quotes by (agent, capability, input hash): the same request asks its agent
// once (who may ask at all: quoteAdmission.ts). Pure and synchronous (the caller passes the time); one per process.
// docs/decisions/metered-pricing-and-quotes.md "Bounded quotes before payment".
import { createHash } from "node:crypto"
import { canonicalJson } from "../../src/domain/Json.js"

export interface QuoteCacheOptions {
  /** How long a quote answers the same request again (ms); 0 disables the cache. */
  readonly ttlMs: number
  /** Most quotes kept (the oldest go first). */
  readonly maxEntries: number
}

export const quoteKey = (agentId: string, capabilityId: string, input: unknown) =>
  `${agentId}\u0000${capabilityId}\u0000${createHash("sha256").update(canonicalJson(input), "utf8").digest("hex")}`

export const makeQuoteCache = (options: QuoteCacheOptions) => {
  const quotes = new Map<string, { readonly price: bigint; readonly until: number }>()

  /** A quote given for the same request less than `ttlMs` ago. */
  const get = (key: string, now: number): bigint | undefined => {
    const hit = quotes.get(key)
    if (hit === undefined) return undefined
    if (hit.until <= now) {
      quotes.delete(key)
      return undefined
    }
    return hit.price
  }

  const put = (key: string, price: bigint, now: number) => {
    if (options.ttlMs <= 0) return
    quotes.delete(key)
    quotes.set(key, { price, until: now + options.ttlMs })
    // Map iteration is insertion order: the first keys are the oldest.
    for (const oldest of quotes.keys()) {
      if (quotes.size <= options.maxEntries) break
      quotes.delete(oldest)
    }
  }

  return { get, put, size: () => quotes.size } as const
}
