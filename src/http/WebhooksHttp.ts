// Handlers of /api/v1/webhooks.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import type { SubscriptionRow } from "../../services/webhooks/Repo.js"
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

export const WebhooksHttpLive = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.map(Subscriptions, (subscriptions) =>
    handlers
      .handle("create", ({ headers, payload }) =>
        Effect.map(subscriptions.create(payload, headers), (created) =>
          respond({ ...created, message: "Webhook created. Store the secret now: it is not shown again. Deliveries are signed with it." })))
      .handle("byAgent", ({ headers, path }) => Effect.map(subscriptions.list(path.agentId, headers), (rows) => respond({ webhooks: rows.map(view) })))
      .handle("update", ({ headers, path, payload }) => Effect.map(subscriptions.update(path.id, payload, headers), respond))
      .handle("remove", ({ headers, path }) => Effect.map(subscriptions.remove(path.id, headers), respond))
      .handle("rotateSecret", ({ headers, path }) =>
        Effect.map(subscriptions.rotate(path.id, headers), (rotated) =>
          respond({ ...rotated, message: "Secret rotated. Store it now: it is not shown again; the old secret no longer signs." })))))
