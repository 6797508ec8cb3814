// Where a delivery goes and how it is signed, by its target: a subscription (its current URL, its whsec_ secret, the
// spec's and Standard Webhooks' headers) or an execution's callback (the URL on the delivery, keyed with the hex SHA-256
// of the client's X-PAYMENT value). A paused or deleted subscription's delivery waits; an older callback post superseded.
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Option } from "effect"
import type { DeliveryRow } from "./DeliveriesRepo.js"
import { WebhooksRepo } from "./Repo.js"
import { WebhookSecrets } from "./Secrets.js"
import { callbackHeaders, deliveryHeaders } from "./signing.js"

export type Target =
  /** Post to `url` with the headers of attempt `attempt` at time `at`. */
  | { readonly _tag: "Send"; readonly url: string; readonly headers: (attempt: number, at: number) => Record<string, string> }
  /** Not now: the subscription is switched off or deleted (a re-enable or requeue resumes it). */
  | { readonly _tag: "Wait" }
  /** A newer post of the same execution's result exists: this one is never sent again. */
  | { readonly _tag: "Supersede"; readonly by: string }

export class DeliveryTargets extends Effect.Service<DeliveryTargets>()("webhooks/DeliveryTargets", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const subscriptions = yield* WebhooksRepo
    const secrets = yield* WebhookSecrets

    const subscription = (delivery: DeliveryRow, subscriptionId: string) =>
      Effect.map(subscriptions.find(subscriptionId), (sub): Target => {
        if (Option.isNone(sub) || !sub.value.isActive) return { _tag: "Wait" }
        const secret = secrets.decrypt(sub.value.secretEncrypted)
        return {
          _tag: "Send",
          url: sub.value.url,
          headers: (attempt, at) =>
            deliveryHeaders({ secret, subscriptionId, deliveryId: delivery.id, eventType: delivery.eventType, attempt, body: delivery.body, at })
        }
      })

    const callback = (delivery: DeliveryRow, executionId: string, url: string) =>
      Effect.map(
        sql<{ key: string; latest: string }>`
          SELECT p.header_sha256 AS key,
                 (SELECT d.id FROM webhook_deliveries d WHERE d.execution_id = e.id ORDER BY d.seq DESC LIMIT 1) AS latest
          FROM executions e JOIN payments p ON p.id = e.payment_id WHERE e.id = ${executionId}`,
        ([found]): Target => {
          if (found === undefined) return { _tag: "Wait" }
          if (found.latest !== delivery.id) return { _tag: "Supersede", by: found.latest }
          return {
            _tag: "Send",
            url,
            headers: (attempt) =>
              callbackHeaders({ key: found.key, executionId, deliveryId: delivery.id, eventType: delivery.eventType, attempt, body: delivery.body })
          }
        }
      )

    const resolve = (delivery: DeliveryRow): Effect.Effect<Target, SqlError.SqlError> =>
      delivery.target === "subscription" && delivery.subscriptionId !== null
        ? subscription(delivery, delivery.subscriptionId)
        : delivery.target === "callback" && delivery.executionId !== null && delivery.url !== null
        ? callback(delivery, delivery.executionId, delivery.url)
        : Effect.dieMessage(`delivery ${delivery.id}: target ${delivery.target} without its columns`)

    return { resolve } as const
  }),
  dependencies: [WebhooksRepo.Default, WebhookSecrets.Default]
}) {}
