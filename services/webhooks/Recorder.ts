// Group commit of webhook attempts: an idle recorder records an attempt at once; attempts whose posts finish while a
// recording transaction is in flight wait and go together in the next one (BEGIN, one lock of all their delivery rows,
// one batched statement of attempt rows, machine saves, history and subscription counters, COMMIT).
import { SqlClient, type SqlError } from "@effect/sql"
import { Deferred, Effect, Either, Exit } from "effect"
import { MachineHost } from "../../machines/Host.js"
import * as GroupCommit from "../sql/GroupCommit.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { DeliveriesRepo, type DeliveryRow } from "./DeliveriesRepo.js"
import { withSpan } from "../../layers/observability/span.js"

export interface AttemptResult {
  readonly attempt: number
  readonly at: number
  readonly elapsed: number
  /** The receiver's status and the start of its answer, or why there was none. */
  readonly outcome: Either.Either<{ readonly status: number; readonly body: string }, string>
}

/** An attempt's status (none without an answer), whether it delivered (a 2xx), and what its log says went wrong. */
export const judged = ({ outcome }: AttemptResult) => {
  const status = Either.isRight(outcome) ? outcome.right.status : null
  const ok = status !== null && status >= 200 && status < 300
  const error = Either.isLeft(outcome) ? outcome.left : ok ? null : `the receiver answered ${status}`
  return { status, ok, error }
}

/** The most attempts recorded in one transaction (a pass posts at most 8 at a time, so a group rarely comes close). */
export const RECORD_GROUP_MAX = 20

interface Waiting {
  readonly delivery: DeliveryRow
  readonly result: AttemptResult
  readonly done: Deferred.Deferred<void, SqlError.SqlError>
}

/** The recorder of a sender (scoped: its loop stops, and whoever still waits is interrupted, with the scope). */
export const makeRecorder = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const deliveries = yield* DeliveriesRepo
  const host = yield* MachineHost

  /** Logs the group's attempts and steps each delivery's machine once, in one unit-of-work transaction. */
  const recordGroup = (group: ReadonlyArray<Waiting>) =>
    UnitOfWork.transaction(sql)(
      Effect.gen(function* () {
        // One statement locks every row (in id order); the host steps each from its row instead of locking it again.
        yield* host.lockAll("webhookDelivery", group.map((w) => w.delivery.id))
        yield* deliveries.addAttempts(group.map(({ delivery, result }) => {
          const { status, error } = judged(result)
          return {
            deliveryId: delivery.id,
            attemptNumber: result.attempt,
            responseStatus: status,
            responseBody: Either.isRight(result.outcome) ? result.outcome.right.body : null,
            errorMessage: error,
            responseTimeMs: result.elapsed,
            at: new Date(result.at)
          }
        }))
        for (const { delivery, result } of group) {
          const { status, ok, error } = judged(result)
          yield* host.deliver("webhookDelivery", delivery.id, ok && status !== null
            ? { type: "DELIVERED", at: result.at, status }
            : { type: "ATTEMPT_FAILED", at: result.at, status, error: error ?? "failed" })
        }
      })
    ).pipe(withSpan("Recorder.record", { attributes: { size: group.length } }))

  const interrupt = (group: Iterable<Waiting>) => Effect.forEach(group, (w) => Deferred.interrupt(w.done), { discard: true })

  /**
   * One group. Should its transaction fail (it rolled back: nothing of it was recorded), each attempt is recorded again
   * on its own, so that one delivery whose step fails does not take the others down with it; one that fails alone is
   * retried after its lease.
   */
  const recordGroupOrEach = (group: ReadonlyArray<Waiting>) =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(recordGroup(group))
      if (Exit.isSuccess(exit) || group.length === 1) {
        return yield* Effect.forEach(group, (w) => Deferred.done(w.done, exit), { discard: true })
      }
      yield* Effect.logError(`recording ${group.length} webhook attempts together failed; recording each on its own`, exit.cause)
      for (const w of group) yield* Effect.flatMap(Effect.exit(recordGroup([w])), (e) => Deferred.done(w.done, e))
    }).pipe(Effect.onInterrupt(() => interrupt(group)))

  const commits = yield* GroupCommit.make<Waiting>({ maxGroup: RECORD_GROUP_MAX, run: recordGroupOrEach, onStop: interrupt })

  /** Records one attempt's outcome (with whichever others are ready); done once its transaction committed. */
  const record = (delivery: DeliveryRow, result: AttemptResult) =>
    Effect.gen(function* () {
      const done = yield* Deferred.make<void, SqlError.SqlError>()
      yield* commits.offer({ delivery, result, done })
      return yield* Deferred.await(done)
    })

  return { record } as const
})
