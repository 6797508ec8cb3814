// The bound on quotes asked before payment: the same request answered from the cache until its TTL, the oldest entries
// dropped past the size, and at most N quote requests in flight per agent.
import { describe, expect, it } from "vitest"
import { makeQuoteCache, quoteKey } from "../../services/executions/quoteCache.js"

describe("quote cache", () => {
  it("answers the same agent, capability and input (any key order) until the TTL, then asks again", () => {
    const cache = makeQuoteCache({ ttlMs: 30_000, maxEntries: 10, maxInFlightPerAgent: 2 })
    const key = quoteKey("a1", "quoted", { x: 1, y: [2, 3] })
    expect(quoteKey("a1", "quoted", { y: [2, 3], x: 1 })).toBe(key)
    expect(quoteKey("a1", "quoted", { x: 2, y: [2, 3] })).not.toBe(key)
    expect(quoteKey("a1", "other", { x: 1, y: [2, 3] })).not.toBe(key)
    cache.put(key, 30_000n, 1_000)
    expect(cache.get(key, 30_999)).toBe(30_000n)
    expect(cache.get(key, 31_000)).toBeUndefined()
  })

  it("keeps at most maxEntries, dropping the oldest; a TTL of 0 keeps nothing", () => {
    const cache = makeQuoteCache({ ttlMs: 30_000, maxEntries: 2, maxInFlightPerAgent: 2 })
    cache.put("k1", 1n, 0)
    cache.put("k2", 2n, 0)
    cache.put("k3", 3n, 0)
    expect([cache.get("k1", 1), cache.get("k2", 1), cache.get("k3", 1)]).toEqual([undefined, 2n, 3n])
    const off = makeQuoteCache({ ttlMs: 0, maxEntries: 2, maxInFlightPerAgent: 2 })
    off.put("k1", 1n, 0)
    expect(off.get("k1", 0)).toBeUndefined()
  })

  it("lets at most maxInFlightPerAgent quote requests to one agent at a time; others are not affected", () => {
    const cache = makeQuoteCache({ ttlMs: 30_000, maxEntries: 10, maxInFlightPerAgent: 2 })
    expect([cache.acquire("a1"), cache.acquire("a1"), cache.acquire("a1"), cache.acquire("a2")]).toEqual([true, true, false, true])
    cache.release("a1")
    expect(cache.acquire("a1")).toBe(true)
  })
})
