// Bounds the quote requests an unpaying caller can cause (a dynamic capability's quote is asked before payment): a
// short cache of quotes by (agent, capability, input hash), and a cap on quote requests in flight per agent. Pure and
// synchronous (the caller passes the time); one per process. docs/decisions.md "Bounded quotes before payment".
import { createHash } from "node:crypto"
import { canonicalJson } from "../../src/domain/Json.js"

export interface QuoteCacheOptions {
  /** How long a quote answers the same request again (ms); 0 disables the cache. */
  readonly ttlMs: number
  /** Most quotes kept (the oldest go first). */
  readonly maxEntries: number
  /** Most quote requests in flight to one agent at a time; more are refused without calling it. */
  readonly maxInFlightPerAgent: number
}

export const quoteKey = (agentId: string, capabilityId: string, input: unknown) =>
  `${agentId}\u0000${capabilityId}\u0000${createHash("sha256").update(canonicalJson(input), "utf8").digest("hex")}`

export const makeQuoteCache = (options: QuoteCacheOptions) => {
  const quotes = new Map<string, { readonly price: bigint; readonly until: number }>()
  const inFlight = new Map<string, number>()

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

  /** Takes a slot for a quote request to `agentId`; false when its agent already has the most in flight. */
  const acquire = (agentId: string): boolean => {
    const n = inFlight.get(agentId) ?? 0
    if (n >= options.maxInFlightPerAgent) return false
    inFlight.set(agentId, n + 1)
    return true
  }

  const release = (agentId: string) => {
    const n = (inFlight.get(agentId) ?? 1) - 1
    if (n <= 0) inFlight.delete(agentId)
    else inFlight.set(agentId, n)
  }

  return { get, put, acquire, release, size: () => quotes.size } as const
}
