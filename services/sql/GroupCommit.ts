// Group commit: items queue for a loop that runs them in groups. An idle loop runs whatever waits at once (a lone item
// adds no wait); while a group is in flight the next items queue and go together when it is done. With `maxInFlight`
// above 1 a further group goes out beside the ones in flight, but only when it is full (a partial one fills up behind).
import { Chunk, Effect, FiberSet, Queue, Ref, type Scope } from "effect"

export interface GroupCommit<A> {
  /** Queues an item for the next group. */
  readonly offer: (item: A) => Effect.Effect<void>
  /** Items waiting for a group. */
  readonly waiting: Effect.Effect<number>
}

/**
 * Starts the loop in the caller's scope. `run` settles every item of its group itself (it must not fail; it runs in
 * its own fiber, interrupted when the scope closes); `onStop` gets the items still queued then.
 */
export const make = <A>(options: {
  readonly maxGroup: number
  readonly maxInFlight?: number
  readonly run: (group: ReadonlyArray<A>) => Effect.Effect<void>
  readonly onStop: (left: ReadonlyArray<A>) => Effect.Effect<void>
}): Effect.Effect<GroupCommit<A>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { maxGroup, maxInFlight = 1, run, onStop } = options
    const queue = yield* Queue.unbounded<A>()
    /** Groups in flight, and a signal (coalesced) that an item queued or a group finished. */
    const inFlight = yield* Ref.make(0)
    const wake = yield* Queue.sliding<void>(1)
    const groups = yield* FiberSet.make()

    /** Whether the next group goes now: nothing is in flight, or a full group waits and there is room beside. */
    const ready = Effect.gen(function* () {
      const out = yield* Ref.get(inFlight)
      const size = yield* Queue.size(queue)
      return size > 0 && (out === 0 || (out < maxInFlight && size >= maxGroup))
    })

    const turn = Effect.gen(function* () {
      while (!(yield* ready)) yield* Queue.take(wake)
      const group = Chunk.toReadonlyArray(yield* Queue.takeUpTo(queue, maxGroup))
      yield* Ref.update(inFlight, (n) => n + 1)
      yield* FiberSet.run(groups, run(group).pipe(
        Effect.ensuring(Effect.zipRight(Ref.update(inFlight, (n) => n - 1), Queue.offer(wake, undefined)))
      ))
    })

    yield* Effect.forkScoped(Effect.forever(turn))
    yield* Effect.addFinalizer(() => Effect.flatMap(Queue.takeAll(queue), (left) => onStop(Chunk.toReadonlyArray(left))))

    return {
      offer: (item) => Effect.zipRight(Queue.offer(queue, item), Queue.offer(wake, undefined)),
      waiting: Queue.size(queue)
    }
  })
