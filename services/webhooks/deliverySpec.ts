// How the host runs a delivery's machine: a subscription's failure count (disabled after 10 in a row; a callback has no
// subscription to count or disable), the dead-letter entry, and the retry time saved with the snapshot (the sender's
// lease column is the machine's timer).
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { MachineSpec } from "../../machines/Host.js"
import { isPersistedSnapshot, startMachine } from "../../machines/step.js"
import { deliveryMachine } from "../../machines/webhookDelivery.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { newId } from "../../src/domain/Ids.js"
import { type DeliveryRow, DeliveriesRepo } from "./DeliveriesRepo.js"

/** How stale a subscription's `last_success` may be (a success within this much of the recorded one does not rewrite it). */
export const LAST_SUCCESS_RESOLUTION_MS = 1_000

/** Consecutive failed attempts, across deliveries, after which a subscription is switched off. */
export const DISABLE_AFTER_FAILURES = 10

export type DeliverySpec = MachineSpec<typeof deliveryMachine, DeliveryRow, "countAttempt" | "planRetry">

export class DeliveryMachine extends Effect.Service<DeliveryMachine>()("webhooks/DeliveryMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* DeliveriesRepo
    const spec: DeliverySpec = {
      machine: deliveryMachine,
      pure: ["countAttempt", "planRetry"],
      lock: repo.lock,
      snapshot: (row) => (isPersistedSnapshot(row.machineSnapshot) ? row.machineSnapshot : startMachine(deliveryMachine, {}).persisted),
      actions: {
        countOutcome: ({ success }, { row, event }) =>
          row.subscriptionId === null
            ? Effect.void
            : success
            // Only when it changes something (a failure streak to reset, or a last success older than a second): every
            // delivery of a busy webhook would otherwise queue on its subscription's row lock (70 ms per success measured
            // under load, each wait holding a database connection).
            ? UnitOfWork.write(sql, ["webhook_subscriptions"], sql`UPDATE webhook_subscriptions SET failure_count = 0, last_success = ${new Date(event.at)}
                  WHERE id = ${row.subscriptionId}
                    AND (failure_count <> 0 OR last_success IS NULL OR last_success < ${new Date(event.at - LAST_SUCCESS_RESOLUTION_MS)})`)
            : UnitOfWork.write(sql, ["webhook_subscriptions"], sql`UPDATE webhook_subscriptions SET failure_count = failure_count + 1, last_failure = ${new Date(event.at)},
                  is_active = is_active AND failure_count + 1 < ${DISABLE_AFTER_FAILURES} WHERE id = ${row.subscriptionId}`),
        deadLetter: (_, { row, event }) =>
          sql`INSERT INTO webhook_dead_letters ${sql.insert({
            id: newId("dlq"),
            deliveryId: row.id,
            subscriptionId: row.subscriptionId,
            eventType: row.eventType,
            lastAttemptAt: new Date(event.at),
            totalAttempts: row.attemptCount + 1,
            lastError: event.type === "ATTEMPT_FAILED" ? event.error.slice(0, 500) : null
          })}`.pipe(Effect.asVoid)
      },
      save: (id, _row, step, event) => {
        const context = step.snapshot.context
        return UnitOfWork.update(sql, "webhook_deliveries", id, {
          status: step.state === "delivered" || step.state === "dead" || step.state === "superseded" ? step.state : "pending",
          machineSnapshot: JSON.stringify(step.persisted),
          attemptCount: context.attempts,
          ...(event.type === "SUPERSEDED" ? {} : { responseStatus: event.status }),
          ...(step.state === "pending" && context.nextAttemptAt !== null ? { nextAttemptAt: new Date(context.nextAttemptAt) } : {}),
          ...(event.type === "DELIVERED" ? { deliveredAt: new Date(event.at) } : {})
        })
      },
      timerEvent: () => Option.none()
    }
    return { spec } as const
  }),
  dependencies: [DeliveriesRepo.Default]
}) {}
