// Two effects at the same time, both results or the first failure: what `Effect.all([a, b], {concurrency: "unbounded"})`
// does for two effects that cannot fail (only die), with a fraction of its runtime work (issue 29: ~100 fiber-runtime
// instructions less per paid call). A failure (defect) or interruption of one side interrupts the other and waits for
// its end; an interruption of the caller interrupts both.
import { Effect, Exit, Fiber } from "effect"

export const both = <A, B>(left: Effect.Effect<A>, right: Effect.Effect<B>): Effect.Effect<readonly [A, B]> =>
  Effect.flatMap(Effect.fork(left), (l) =>
    Effect.flatMap(Effect.fork(right), (r) =>
      Effect.async<readonly [A, B]>((resume) => {
        let a: Exit.Exit<A> | undefined
        let b: Exit.Exit<B> | undefined
        let done = false
        const check = () => {
          if (done) return
          if (a !== undefined && Exit.isFailure(a)) {
            done = true
            resume(Effect.zipRight(Fiber.interrupt(r), Effect.failCause(a.cause)))
          } else if (b !== undefined && Exit.isFailure(b)) {
            done = true
            resume(Effect.zipRight(Fiber.interrupt(l), Effect.failCause(b.cause)))
          } else if (a !== undefined && b !== undefined && Exit.isSuccess(a) && Exit.isSuccess(b)) {
            done = true
            resume(Effect.succeed([a.value, b.value] as const))
          }
        }
        const onLeft = (exit: Exit.Exit<A>) => {
          a = exit
          check()
        }
        const onRight = (exit: Exit.Exit<B>) => {
          b = exit
          check()
        }
        l.addObserver(onLeft)
        r.addObserver(onRight)
        return Effect.suspend(() => {
          done = true
          l.removeObserver(onLeft)
          r.removeObserver(onRight)
          return Fiber.interruptAll([l, r])
        })
      })))
