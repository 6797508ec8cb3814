// Handlers of /api/v1/webhooks.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import type { SubscriptionRow } from "../../services/webhooks/Repo.js"
import { DeliveryLog } from "../../services/webhooks/DeliveryLog.js"
import { Subscriptions } from "../../services/webhooks/Subscriptions.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

const view = (s: SubscriptionRow) => ({
  id: s.id,
  url: s.url,
  events: s.events,
  isActive: s.isActive,
  failure_count: s.failureCount,
  last_failure: s.lastFailure?.toISOString() ?? null,
  last_success: s.lastSuccess?.toISOString() ?? null,
  created_at: s.createdAt.toISOString()
})

const iso = (d: Date | null) => d?.toISOString() ?? null

export const WebhooksHttpLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions
    const log = yield* DeliveryLog
    return handlers
      .handle("create", ({ headers, payload }) =>
        Effect.map(subscriptions.create(payload, headers), (created) =>
          respond({ ...created, message: "Webhook created. Store the secret now: it is not shown again. Deliveries are signed with it." })))
      .handle("byAgent", ({ headers, path }) => Effect.map(subscriptions.list(path.agentId, headers), (rows) => respond({ webhooks: rows.map(view) })))
      .handle("update", ({ headers, path, payload }) => Effect.map(subscriptions.update(path.id, payload, headers), respond))
      .handle("remove", ({ headers, path }) => Effect.map(subscriptions.remove(path.id, headers), respond))
      .handle("rotateSecret", ({ headers, path }) =>
        Effect.map(subscriptions.rotate(path.id, headers), (rotated) =>
          respond({ ...rotated, message: "Secret rotated. Store it now: it is not shown again; the old secret no longer signs." })))
      .handle("test", ({ headers, path }) => Effect.map(log.test(path.id, headers), respond))
      .handle("deliveries", ({ headers, path, urlParams }) =>
        Effect.map(log.deliveries(path.id, headers, urlParams.limit ?? 20, urlParams.offset ?? 0), (rows) =>
          respond({
            deliveries: rows.map((d) => ({
              id: d.id,
              event_type: d.eventType,
              status: d.status,
              response_status: d.responseStatus,
              attempt_count: d.attemptCount,
              delivered_at: iso(d.deliveredAt),
              created_at: d.createdAt.toISOString()
            }))
          })))
      .handle("logs", ({ headers, path }) =>
        Effect.map(log.logs(path.id, path.deliveryId, headers), ({ attempts, delivery }) =>
          respond({
            delivery: { id: delivery.id, eventType: delivery.eventType, status: delivery.status, attemptCount: delivery.attemptCount, createdAt: delivery.createdAt.toISOString() },
            attempts: attempts.map((a) => ({
              id: a.id,
              attempt_number: a.attemptNumber,
              response_status: a.responseStatus,
              response_body: a.responseBody,
              error_message: a.errorMessage,
              response_time_ms: a.responseTimeMs,
              created_at: a.createdAt.toISOString()
            }))
          })))
      .handle("deadLetters", ({ headers, path, urlParams }) => {
        const limit = urlParams.limit ?? 20
        const offset = urlParams.offset ?? 0
        return Effect.map(log.deadLetters(path.id, headers, limit, offset), ({ rows, total }) =>
          respond({
            deadLetterQueue: rows.map((e) => ({
              id: e.id,
              delivery_id: e.deliveryId,
              event_type: e.eventType,
              last_attempt_at: e.lastAttemptAt.toISOString(),
              total_attempts: e.totalAttempts,
              last_error: e.lastError,
              requeued_at: iso(e.requeuedAt),
              created_at: e.createdAt.toISOString()
            })),
            pagination: { total, limit, offset, hasMore: offset + rows.length < total }
          }))
      })
      .handle("requeue", ({ headers, path }) => Effect.map(log.requeue(path.id, path.dlqId, headers), respond))
  }))
