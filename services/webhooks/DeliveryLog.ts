// What the owner sees of its webhook's deliveries: the list, one delivery's attempts, the dead-letter queue, and requeue
// (a new delivery of the same event, same body; the entry gets requeued_at, once).
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { startMachine } from "../../machines/step.js"
import { deliveryMachine } from "../../machines/webhookDelivery.js"
import { Conflict, NotFound } from "../../src/domain/Errors.js"
import type { WalletAuthHeaders } from "../agents/WalletAuth.js"
import { DeliveriesRepo } from "./DeliveriesRepo.js"
import { Dispatcher } from "./Dispatcher.js"
import { Subscriptions } from "./Subscriptions.js"

export class DeliveryLog extends Effect.Service<DeliveryLog>()("webhooks/DeliveryLog", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* DeliveriesRepo
    const subscriptions = yield* Subscriptions
    const dispatcher = yield* Dispatcher

    const test = (id: string, auth: WalletAuthHeaders) => Effect.flatMap(subscriptions.authorized(id, auth), dispatcher.sendTest)

    const deliveries = (id: string, auth: WalletAuthHeaders, limit: number, offset: number) =>
      Effect.zipRight(subscriptions.readable(id, auth), repo.bySubscription(id, limit, offset)).pipe(Effect.catchTag("SqlError", Effect.die))

    const logs = (id: string, deliveryId: string, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        yield* subscriptions.readable(id, auth)
        const delivery = yield* repo.find(deliveryId)
        if (Option.isNone(delivery) || delivery.value.subscriptionId !== id) {
          return yield* new NotFound({ code: "NOT_FOUND", message: `no delivery ${deliveryId} for webhook ${id}` })
        }
        return { delivery: delivery.value, attempts: yield* repo.attemptsOf(deliveryId) }
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    const deadLetters = (id: string, auth: WalletAuthHeaders, limit: number, offset: number) =>
      Effect.zipRight(subscriptions.readable(id, auth), repo.deadLettersOf(id, limit, offset)).pipe(Effect.catchTag("SqlError", Effect.die))

    /**
     * Requeues a dead-letter entry inside the caller's transaction: a new delivery of the same event and body, the entry
     * marked requeued (once). `subscriptionId`: the owner's webhook the entry must belong to (none: an operator's requeue).
     */
    const requeueEntry = (dlqId: string, subscriptionId: string | undefined) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const entry = yield* repo.lockDeadLetter(dlqId)
        const original = Option.isSome(entry) ? yield* repo.find(entry.value.deliveryId) : Option.none()
        if (Option.isNone(entry) || Option.isNone(original) || (subscriptionId !== undefined && original.value.subscriptionId !== subscriptionId)) {
          return yield* new NotFound({ code: "NOT_FOUND", message: `no dead-letter entry ${dlqId}${subscriptionId === undefined ? "" : ` for webhook ${subscriptionId}`}` })
        }
        const subscription = original.value.subscriptionId
        if (subscription === null) {
          // An execution callback's dead letter: its result stays at the status URL; callbacks are never requeued.
          return yield* new NotFound({ code: "NOT_FOUND", message: `dead-letter entry ${dlqId} is an execution callback; only webhook deliveries are requeued` })
        }
        if (entry.value.requeuedAt !== null) {
          return yield* new Conflict({ code: "DELIVERY_ALREADY_REQUEUED", message: "this entry was already requeued", details: { requeuedAt: entry.value.requeuedAt.toISOString() } })
        }
        const created = yield* repo.insert({
          subscriptionId: subscription,
          eventId: original.value.eventId,
          eventType: original.value.eventType,
          body: original.value.body,
          snapshot: startMachine(deliveryMachine, {}).persisted,
          at: new Date(now),
          requeuedFrom: original.value.id
        })
        yield* sql`UPDATE webhook_dead_letters SET requeued_at = ${new Date(now)} WHERE id = ${dlqId}`
        return { message: "Requeued: a new delivery of the same event is on its way.", newDeliveryId: Option.getOrThrow(created), originalDlqId: dlqId }
      })

    const requeue = (id: string, dlqId: string, auth: WalletAuthHeaders) =>
      Effect.zipRight(subscriptions.authorized(id, auth), sql.withTransaction(requeueEntry(dlqId, id))).pipe(Effect.catchTag("SqlError", Effect.die))

    return { test, deliveries, logs, deadLetters, requeue, requeueEntry } as const
  }),
  dependencies: [DeliveriesRepo.Default, Subscriptions.Default, Dispatcher.Default]
}) {}
