// Execution callbacks (callbackUrl/webhookUrl) on the webhook delivery machinery: a result becomes a delivery to the
// execution's callback URL, in the transaction that produced it (retried, logged, dead-lettered and leased like every
// delivery; signed with the key from the client's X-PAYMENT), and the client sees how its callback went on the status view.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { startMachine } from "../../machines/step.js"
import { deliveryMachine } from "../../machines/webhookDelivery.js"
import type { CallbackView } from "../../src/domain/Execution.js"
import { DeliveriesRepo } from "./DeliveriesRepo.js"

export class ExecutionCallbacks extends Effect.Service<ExecutionCallbacks>()("webhooks/ExecutionCallbacks", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* DeliveriesRepo

    /**
     * The result is ready: a post of `payload` to the execution's callback URL (none without one). Inside the transaction
     * of the step that produced it. A still-pending older post of the same execution is superseded when next due.
     */
    const ready = (executionId: string, eventType: string, payload: Record<string, unknown>) =>
      Effect.gen(function* () {
        const at = new Date(yield* Clock.currentTimeMillis)
        yield* repo.insertCallback(executionId, {
          eventId: `${executionId}:${eventType}`,
          eventType,
          body: JSON.stringify(payload),
          snapshot: startMachine(deliveryMachine, {}).persisted,
          at
        })
        // Wakes the sender at commit (it also polls every second).
        yield* sql`SELECT pg_notify('outbox_events', '')`
      })

    /** How the newest callback post of an execution went (none when it never had one). */
    const status = (executionId: string) =>
      Effect.gen(function* () {
        const found = yield* repo.latestCallback(executionId)
        if (Option.isNone(found)) return Option.none<CallbackView>()
        const d = found.value
        const [last] = d.attemptCount === 0 ? [] : yield* repo.attemptsOf(d.id).pipe(Effect.map((all) => all.slice(-1)))
        return Option.some<CallbackView>({
          deliveryId: d.id,
          event: d.eventType,
          status: d.status,
          attempts: d.attemptCount,
          lastResponseStatus: d.responseStatus,
          ...(last === undefined ? {} : { lastAttemptAt: last.createdAt.toISOString() }),
          ...(last === undefined || last.errorMessage === null ? {} : { lastError: last.errorMessage }),
          ...(d.status === "pending" && d.attemptCount > 0 ? { nextAttemptAt: d.nextAttemptAt.toISOString() } : {}),
          ...(d.deliveredAt === null ? {} : { deliveredAt: d.deliveredAt.toISOString() })
        })
      }).pipe(Effect.withSpan("ExecutionCallbacks.status"))

    return { ready, status } as const
  }),
  dependencies: [DeliveriesRepo.Default]
}) {}
