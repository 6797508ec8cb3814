// The agent cache's entries: a read that was in flight when a change arrived never caches what it read.
import { describe, expect, it } from "vitest"
import { makeEntries } from "../../services/agents/cacheEntries.js"

describe("agent cache entries", () => {
  it("a database read that started before a change's notification is not cached (it may predate the change)", () => {
    const entries = makeEntries<string>(10)
    const since = entries.mark() // a reader misses and starts reading the old row
    entries.drop("a") // the change's notification arrives while the read is in flight
    expect(entries.offer("a", "old", since, 1_000)).toBe(false)
    expect(entries.get("a", 0)).toBeUndefined()
    // A read started after the notification is cached.
    expect(entries.offer("a", "new", entries.mark(), 1_000)).toBe(true)
    expect(entries.get("a", 0)).toBe("new")
  })

  it("a change to another agent does not keep a read from being cached", () => {
    const entries = makeEntries<string>(10)
    const since = entries.mark()
    entries.drop("b")
    expect(entries.offer("a", "row", since, 1_000)).toBe(true)
  })

  it("when the drop it would need was forgotten (too many since) or everything was cleared, the read is not cached", () => {
    const entries = makeEntries<string>(2)
    const since = entries.mark()
    entries.drop("a")
    entries.drop("b")
    entries.drop("c") // forgets the drop of "a"
    expect(entries.offer("a", "old", since, 1_000)).toBe(false)
    const later = entries.mark()
    entries.clear() // a new listening session: notifications may have been missed
    expect(entries.offer("z", "old", later, 1_000)).toBe(false)
    expect(entries.offer("z", "new", entries.mark(), 1_000)).toBe(true)
  })

  it("entries expire and the map stays bounded", () => {
    const entries = makeEntries<string>(2)
    for (const id of ["a", "b", "c"]) entries.offer(id, id, entries.mark(), 100)
    expect(entries.size()).toBe(2)
    expect(entries.get("a", 0)).toBeUndefined()
    expect(entries.get("c", 99)).toBe("c")
    expect(entries.get("c", 100)).toBeUndefined()
  })
})
