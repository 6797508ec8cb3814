// Group commit: items queue for a loop that runs them in groups. An idle loop runs whatever waits at once (a lone item
// adds no wait); while a group is in flight the next items queue and go together when it is done. With `maxInFlight`
// above 1 a further group goes out beside the ones in flight when it is full, or (with `lingerMs`) when its oldest item
// has waited that long: on a chain whose blocks take seconds, a partial group that waited for the one in flight would
// miss the block that one lands in.
import { Chunk, Clock, Duration, Effect, FiberSet, Option, Queue, Ref, type Scope } from "effect"

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
  /** A partial group goes beside the ones in flight (room permitting) once its oldest item waited this long; none: never. */
  readonly lingerMs?: number
  readonly run: (group: ReadonlyArray<A>) => Effect.Effect<void>
  readonly onStop: (left: ReadonlyArray<A>) => Effect.Effect<void>
}): Effect.Effect<GroupCommit<A>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { maxGroup, maxInFlight = 1, lingerMs, run, onStop } = options
    const queue = yield* Queue.unbounded<A>()
    /** Groups in flight, and a signal (coalesced) that an item queued or a group finished. */
    const inFlight = yield* Ref.make(0)
    const wake = yield* Queue.sliding<void>(1)
    const groups = yield* FiberSet.make()
    /** Since when the queue holds items (the time of the last take for items left behind by it). */
    const waitingSince = yield* Ref.make<number | null>(null)

    /** Whether the next group goes now, or how long until its oldest item has lingered enough (none: wait for a wake). */
    const ready = Effect.gen(function* () {
      const out = yield* Ref.get(inFlight)
      const size = yield* Queue.size(queue)
      if (size === 0) return { go: false, lingerLeft: Option.none<number>() }
      if (out === 0 || (out < maxInFlight && size >= maxGroup)) return { go: true, lingerLeft: Option.none<number>() }
      if (lingerMs === undefined || out >= maxInFlight) return { go: false, lingerLeft: Option.none<number>() }
      const since = (yield* Ref.get(waitingSince)) ?? (yield* Clock.currentTimeMillis)
      const left = since + lingerMs - (yield* Clock.currentTimeMillis)
      return left <= 0 ? { go: true, lingerLeft: Option.none<number>() } : { go: false, lingerLeft: Option.some(left) }
    })

    const turn = Effect.gen(function* () {
      for (;;) {
        const r = yield* ready
        if (r.go) break
        yield* Option.match(r.lingerLeft, {
          onNone: () => Queue.take(wake),
          onSome: (ms) => Effect.asVoid(Effect.timeout(Queue.take(wake), Duration.millis(ms)).pipe(Effect.option))
        })
      }
      const group = Chunk.toReadonlyArray(yield* Queue.takeUpTo(queue, maxGroup))
      const now = yield* Clock.currentTimeMillis
      yield* Ref.set(waitingSince, (yield* Queue.size(queue)) > 0 ? now : null)
      yield* Ref.update(inFlight, (n) => n + 1)
      yield* FiberSet.run(groups, run(group).pipe(
        Effect.ensuring(Effect.zipRight(Ref.update(inFlight, (n) => n - 1), Queue.offer(wake, undefined)))
      ))
    })

    yield* Effect.forkScoped(Effect.forever(turn))
    yield* Effect.addFinalizer(() => Effect.flatMap(Queue.takeAll(queue), (left) => onStop(Chunk.toReadonlyArray(left))))

    return {
      offer: (item) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          yield* Ref.update(waitingSince, (since) => since ?? now)
          yield* Queue.offer(queue, item)
          yield* Queue.offer(wake, undefined)
        }),
      waiting: Queue.size(queue)
    }
  })
