// services/executions/both.ts: settle and call the agent at the same time, as Effect.all did (issue 29).
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref } from "effect"
import { both } from "../../services/executions/both.js"

describe("both", () => {
  it.effect("returns both results in order, whichever finishes first", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(both(Effect.as(Deferred.await(gate), "slow"), Effect.succeed(2)))
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(fiber)).toEqual(["slow", 2])
      expect(yield* both(Effect.succeed(1), Effect.succeed("b"))).toEqual([1, "b"])
    }))

  it.effect("a defect of either side interrupts the other and is the result", () =>
    Effect.gen(function* () {
      for (const side of ["left", "right"] as const) {
        const interrupted = yield* Ref.make(false)
        const started = yield* Deferred.make<void>()
        const hanging = Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(Effect.onInterrupt(() => Ref.set(interrupted, true)))
        const dying = Effect.zipRight(Deferred.await(started), Effect.dieMessage(`${side} died`))
        const exit = yield* Effect.exit(side === "left" ? both(dying, hanging) : both(hanging, dying))
        expect(Exit.isFailure(exit) && String(Exit.causeOption(exit)).includes(`${side} died`)).toBe(true)
        expect(yield* Ref.get(interrupted)).toBe(true)
      }
    }))

  it.effect("interrupting the caller interrupts both sides", () =>
    Effect.gen(function* () {
      const count = yield* Ref.make(0)
      const side = Effect.zipRight(Ref.update(count, (n) => n + 1), Effect.never).pipe(Effect.onInterrupt(() => Ref.update(count, (n) => n + 10)))
      const fiber = yield* Effect.fork(both(side, side))
      while ((yield* Ref.get(count)) < 2) yield* Effect.yieldNow()
      yield* Fiber.interrupt(fiber)
      expect(yield* Ref.get(count)).toBe(22)
    }))
})
