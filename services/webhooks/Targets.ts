// Where a delivery goes and how it is signed, by its target: a subscription (its current URL, its whsec_ secret, the
// spec's and Standard Webhooks' headers) or an execution's callback (the URL on the delivery, keyed with the hex SHA-256
// of the client's X-PAYMENT value). A paused or deleted subscription's delivery waits; an older callback post superseded.
// A pass's deliveries are resolved together (`resolveAll`: one statement per kind of target).
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Option } from "effect"
import type { DeliveryRow } from "./DeliveriesRepo.js"
import { type SubscriptionRow, WebhooksRepo } from "./Repo.js"
import { WebhookSecrets } from "./Secrets.js"
import { callbackHeaders, deliveryHeaders } from "./signing.js"

export type Target =
  /** Post to `url` with the headers of attempt `attempt` at time `at`. */
  | { readonly _tag: "Send"; readonly url: string; readonly headers: (attempt: number, at: number) => Record<string, string> }
  /** Not now: the subscription is switched off or deleted (a re-enable or requeue resumes it). */
  | { readonly _tag: "Wait" }
  /** A newer post of the same execution's result exists: this one is never sent again. */
  | { readonly _tag: "Supersede"; readonly by: string }

/** What a callback's target needs from its execution: the payment's key and the execution's newest callback delivery. */
interface CallbackFacts {
  readonly id: string
  readonly key: string
  readonly latest: string
}

export class DeliveryTargets extends Effect.Service<DeliveryTargets>()("webhooks/DeliveryTargets", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const subscriptions = yield* WebhooksRepo
    const secrets = yield* WebhookSecrets

    /** A subscription's delivery, from its subscription as read (none: deleted). */
    const fromSubscription = (delivery: DeliveryRow, subscriptionId: string, sub: SubscriptionRow | undefined): Target => {
      if (sub === undefined || !sub.isActive) return { _tag: "Wait" }
      const secret = secrets.decrypt(sub.secretEncrypted)
      return {
        _tag: "Send",
        url: sub.url,
        headers: (attempt, at) =>
          deliveryHeaders({ secret, subscriptionId, deliveryId: delivery.id, eventType: delivery.eventType, attempt, body: delivery.body, at })
      }
    }

    /** A callback delivery, from its execution's payment key and newest callback delivery (none: no such execution). */
    const fromCallback = (delivery: DeliveryRow, executionId: string, url: string, found: CallbackFacts | undefined): Target => {
      if (found === undefined) return { _tag: "Wait" }
      if (found.latest !== delivery.id) return { _tag: "Supersede", by: found.latest }
      return {
        _tag: "Send",
        url,
        headers: (attempt) =>
          callbackHeaders({ key: found.key, executionId, deliveryId: delivery.id, eventType: delivery.eventType, attempt, body: delivery.body })
      }
    }

    const callbackFacts = (executionIds: ReadonlyArray<string>) =>
      executionIds.length === 0
        ? Effect.succeed<ReadonlyArray<CallbackFacts>>([])
        : sql<CallbackFacts>`
          SELECT e.id, p.header_sha256 AS key,
                 (SELECT d.id FROM webhook_deliveries d WHERE d.execution_id = e.id ORDER BY d.seq DESC LIMIT 1) AS latest
          FROM executions e JOIN payments p ON p.id = e.payment_id WHERE e.id IN ${sql.in(executionIds)}`

    const resolve = (delivery: DeliveryRow): Effect.Effect<Target, SqlError.SqlError> => {
      const { executionId, subscriptionId, url } = delivery
      return delivery.target === "subscription" && subscriptionId !== null
        ? Effect.map(subscriptions.find(subscriptionId), (sub) => fromSubscription(delivery, subscriptionId, Option.getOrUndefined(sub)))
        : delivery.target === "callback" && executionId !== null && url !== null
        ? Effect.map(callbackFacts([executionId]), ([found]) => fromCallback(delivery, executionId, url, found))
        : Effect.dieMessage(`delivery ${delivery.id}: target ${delivery.target} without its columns`)
    }

    /**
     * The targets of a pass's deliveries, as `resolve` would give them one by one, in at most two statements (their
     * subscriptions, their executions' callback facts). A delivery without its target's columns is left out (`resolve`
     * reports it).
     */
    const resolveAll = (deliveries: ReadonlyArray<DeliveryRow>): Effect.Effect<ReadonlyMap<string, Target>, SqlError.SqlError> =>
      Effect.gen(function* () {
        const subscriptionIds = new Set<string>()
        const executionIds = new Set<string>()
        for (const d of deliveries) {
          if (d.target === "subscription" && d.subscriptionId !== null) subscriptionIds.add(d.subscriptionId)
          else if (d.target === "callback" && d.executionId !== null && d.url !== null) executionIds.add(d.executionId)
        }
        const [subs, callbacks] = yield* Effect.all([subscriptions.findAll([...subscriptionIds]), callbackFacts([...executionIds])], { concurrency: 2 })
        const subById = new Map(subs.map((s) => [s.id, s]))
        const callbackById = new Map(callbacks.map((c) => [c.id, c]))
        const targets = new Map<string, Target>()
        for (const d of deliveries) {
          if (d.target === "subscription" && d.subscriptionId !== null) targets.set(d.id, fromSubscription(d, d.subscriptionId, subById.get(d.subscriptionId)))
          else if (d.target === "callback" && d.executionId !== null && d.url !== null) targets.set(d.id, fromCallback(d, d.executionId, d.url, callbackById.get(d.executionId)))
        }
        return targets
      })

    return { resolve, resolveAll } as const
  }),
  dependencies: [WebhooksRepo.Default, WebhookSecrets.Default]
}) {}
