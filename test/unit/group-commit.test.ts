// The group commit's loop: an idle loop runs a lone item at once, items behind a group in flight go together, a full
// group goes beside the one in flight only when there is room, and items still queued at the end are handed back.
import { expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Scope, TestClock } from "effect"
import * as GroupCommit from "../../services/sql/GroupCommit.js"

/** A loop whose groups are held until the test lets them go; what ran, in order. */
const held = (options: { readonly maxGroup: number; readonly maxInFlight?: number; readonly lingerMs?: number }) =>
  Effect.gen(function* () {
    const ran: Array<ReadonlyArray<number>> = []
    const gates: Array<Deferred.Deferred<void>> = []
    const stopped: Array<number> = []
    const commits = yield* GroupCommit.make<number>({
      ...options,
      run: (group) =>
        Effect.gen(function* () {
          const gate = yield* Deferred.make<void>()
          ran.push(group)
          gates.push(gate)
          yield* Deferred.await(gate)
        }),
      onStop: (left) => Effect.sync(() => void stopped.push(...left))
    })
    /** Lets the `i`th group finish and gives the loop its turn. */
    const finish = (i: number) => Effect.zipRight(Deferred.succeed(gates[i]!, undefined), settle)
    return { commits, ran, stopped, finish }
  })

/** Enough yields for the loop's fibers to take their turns. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

it.scoped("a lone item runs at once; the items behind a group in flight go together, up to the group size", () =>
  Effect.gen(function* () {
    const { commits, ran, finish } = yield* held({ maxGroup: 3 })
    yield* commits.offer(1)
    yield* settle
    expect(ran).toEqual([[1]])
    for (const i of [2, 3, 4, 5]) yield* commits.offer(i)
    yield* settle
    expect(ran).toEqual([[1]])
    expect(yield* commits.waiting).toBe(4)
    yield* finish(0)
    expect(ran).toEqual([[1], [2, 3, 4]])
    yield* finish(1)
    expect(ran).toEqual([[1], [2, 3, 4], [5]])
  }))

it.scoped("with room for two in flight, only a full group goes beside the one in flight", () =>
  Effect.gen(function* () {
    const { commits, ran, finish } = yield* held({ maxGroup: 2, maxInFlight: 2 })
    yield* commits.offer(1)
    yield* settle
    yield* commits.offer(2)
    yield* settle
    expect(ran).toEqual([[1]])
    yield* commits.offer(3)
    yield* settle
    expect(ran).toEqual([[1], [2, 3]])
    for (const i of [4, 5]) yield* commits.offer(i)
    yield* settle
    expect(ran).toEqual([[1], [2, 3]])
    yield* finish(1)
    expect(ran).toEqual([[1], [2, 3], [4, 5]])
  }))

it.effect("items still queued when the scope closes are handed to onStop", () =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const { commits, stopped } = yield* Scope.extend(held({ maxGroup: 2 }), scope)
    yield* commits.offer(1)
    yield* settle
    for (const i of [2, 3]) yield* commits.offer(i)
    yield* settle
    yield* Scope.close(scope, Exit.void)
    expect(stopped).toEqual([2, 3])
  }))

it.scoped("with a linger, a partial group goes beside the one in flight once its first item waited that long", () =>
  Effect.gen(function* () {
    const { commits, ran, finish } = yield* held({ maxGroup: 10, maxInFlight: 3, lingerMs: 150 })
    yield* commits.offer(1)
    yield* settle
    for (const i of [2, 3]) yield* commits.offer(i)
    yield* settle
    // Not yet: the group in flight may still be joined by more.
    yield* TestClock.adjust(100)
    yield* settle
    expect(ran).toEqual([[1]])
    yield* TestClock.adjust(60)
    yield* settle
    expect(ran).toEqual([[1], [2, 3]])
    // The room beside is bounded: two more lingering groups fill it, the next waits for a group to finish.
    yield* commits.offer(4)
    yield* settle
    yield* TestClock.adjust(200)
    yield* settle
    yield* commits.offer(5)
    yield* settle
    yield* TestClock.adjust(200)
    yield* settle
    expect(ran).toEqual([[1], [2, 3], [4]])
    yield* finish(0)
    expect(ran).toEqual([[1], [2, 3], [4], [5]])
  }))
