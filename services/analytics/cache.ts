// One value recomputed at most once per time-to-live: the first caller after expiry recomputes it while the others wait
// for that result; a failure is not kept.
import { Clock, Effect, Option, SynchronizedRef } from "effect"

export const cachedFor = <A, E, R>(ttlMs: number, compute: Effect.Effect<A, E, R>) =>
  Effect.map(SynchronizedRef.make(Option.none<{ readonly at: number; readonly value: A }>()), (ref) =>
    SynchronizedRef.modifyEffect(ref, (held) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Option.isSome(held) && now - held.value.at < ttlMs
          ? Effect.succeed([held.value.value, held] as const)
          : Effect.map(compute, (value) => [value, Option.some({ at: now, value })] as const))))
