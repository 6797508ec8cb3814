// The quote cache: the same request answered from the cache until its TTL, the oldest entries dropped past the size
// (who may ask an agent at all: quoteAdmission.test.ts).
import { describe, expect, it } from "vitest"
import { makeQuoteCache, quoteKey } from "../../services/executions/quoteCache.js"

describe("quote cache", () => {
  it("answers the same agent, capability and input (any key order) until the TTL, then asks again", () => {
    const cache = makeQuoteCache({ ttlMs: 30_000, maxEntries: 10 })
    const key = quoteKey("a1", "quoted", { x: 1, y: [2, 3] })
    expect(quoteKey("a1", "quoted", { y: [2, 3], x: 1 })).toBe(key)
    expect(quoteKey("a1", "quoted", { x: 2, y: [2, 3] })).not.toBe(key)
    expect(quoteKey("a1", "other", { x: 1, y: [2, 3] })).not.toBe(key)
    cache.put(key, 30_000n, 1_000)
    expect(cache.get(key, 30_999)).toBe(30_000n)
    expect(cache.get(key, 31_000)).toBeUndefined()
  })

  it("keeps at most maxEntries, dropping the oldest; a TTL of 0 keeps nothing", () => {
    const cache = makeQuoteCache({ ttlMs: 30_000, maxEntries: 2 })
    cache.put("k1", 1n, 0)
    cache.put("k2", 2n, 0)
    cache.put("k3", 3n, 0)
    expect([cache.get("k1", 1), cache.get("k2", 1), cache.get("k3", 1)]).toEqual([undefined, 2n, 3n])
    const off = makeQuoteCache({ ttlMs: 0, maxEntries: 2 })
    off.put("k1", 1n, 0)
    expect(off.get("k1", 0)).toBeUndefined()
  })
})
