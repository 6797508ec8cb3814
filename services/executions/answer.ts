// The pipeline's last steps for every way of paying: run and record forked into the service's scope (the work outlives
// the request: a client hanging up must not abandon a paid execution), then the answer: the status URL for an async or
// callback call, otherwise the result within one deadline for the whole paid call (past it the status URL, as an async
// call gets, and the work goes on).
import { Duration, Effect, Fiber, Option, type Scope } from "effect"
import type { Timing } from "./deadline.js"
import type { ExecuteOutcome, PaymentUse } from "./outcome.js"
import type { ExecutionRow } from "./Repo.js"

export interface Answer<E, R> {
  readonly requestId: string
  readonly async: boolean
  readonly callback: boolean
  readonly payment: PaymentUse
  /** Run and record; the row the final transaction left, when it has it. */
  readonly work: Effect.Effect<Option.Option<ExecutionRow>, unknown, R>
  /** The caller's answer from the finished work (`finished`: the work's row, if any). */
  readonly done: (finished: Option.Option<ExecutionRow>) => Effect.Effect<ExecuteOutcome, E, R>
}

export const answering = (scope: Scope.Scope, timing: Timing, publicBaseUrl: string) =>
  <E, R>(a: Answer<E, R>): Effect.Effect<ExecuteOutcome, E, R> =>
    Effect.gen(function* () {
      const work = a.work.pipe(Effect.catchAllCause((cause) =>
        Effect.as(Effect.logError(`execution ${a.requestId}: background work failed; workers will finish it`, cause), Option.none<ExecutionRow>())))
      const fiber = yield* Effect.forkIn(work, scope)
      const statusUrl = `${publicBaseUrl}/api/v1/execute/${a.requestId}`
      if (a.async || a.callback) {
        return { _tag: "Accepted", requestId: a.requestId, jobId: a.async ? a.requestId : undefined, statusUrl, payment: a.payment } satisfies ExecuteOutcome
      }
      // Interrupting the join leaves the forked work running.
      const joined = yield* Fiber.join(fiber).pipe(Effect.timeout(Duration.millis(timing.answerWithinMs)), Effect.option)
      if (Option.isNone(joined)) {
        yield* Effect.logWarning("paid call past its deadline: answered with its status URL, the work goes on", { requestId: a.requestId, deadlineMs: timing.answerWithinMs })
        return { _tag: "Accepted", requestId: a.requestId, jobId: undefined, statusUrl, payment: a.payment } satisfies ExecuteOutcome
      }
      return yield* a.done(joined.value)
    })
