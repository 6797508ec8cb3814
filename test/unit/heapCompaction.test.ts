// The memory-reducing GC the service runs at the end of start-up (src/heapCompaction.ts).
import { Effect } from "effect"
import { getHeapSpaceStatistics } from "node:v8"
import { describe, expect, it } from "vitest"
import { collectGarbage } from "../../src/heapCompaction.js"

const newSpaceBytes = () => getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0

describe("heap compaction", () => {
  it("shrinks the young generation a burst of allocations grew, and the event loop keeps running after it", async () => {
    // A start-up-like burst: many objects that survive a few scavenges.
    const kept: Array<{ readonly i: number; readonly s: string }> = []
    for (let i = 0; i < 400_000; i++) kept.push({ i, s: `item ${i}` })
    expect(kept.length).toBe(400_000)
    kept.length = 0
    await Effect.runPromise(collectGarbage)
    expect(newSpaceBytes()).toBeLessThanOrEqual(4 * 1024 * 1024)
    // Disconnecting the inspector session from inside its callback used to leave the loop stuck: timers must still fire.
    await new Promise((resolve) => setTimeout(resolve, 20))
    await Effect.runPromise(collectGarbage)
  })
})
