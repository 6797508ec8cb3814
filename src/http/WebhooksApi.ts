// /api/v1/webhooks: an agent's subscriptions (its owner's wallet signature on every call: single-use on POST, PATCH and
// DELETE, reusable within its 5 minutes on GET).
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ConflictResponse, ForbiddenResponse, UnauthorizedResponse } from "../domain/Errors.js"
import { AgentId } from "../domain/Ids.js"
import { CreateWebhookRequest, DeadLetterList, DeliveryList, DeliveryLogs, UpdateWebhookRequest, WebhookCreated, WebhookPath, WebhookSubscription } from "../domain/Webhook.js"
import { PageQuery } from "../domain/Withdrawal.js"
import { WalletSignatureHeaders } from "./AgentsApi.js"
import { ok } from "./Envelope.js"

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.post("create", "/")
      .setPayload(CreateWebhookRequest)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(WebhookCreated), { status: 201 })
      .annotate(OpenApi.Summary, "Subscribe an HTTPS endpoint to the agent's events; the signing secret is shown once")
  )
  .add(
    HttpApiEndpoint.get("byAgent", "/agent/:agentId")
      .setPath(Schema.Struct({ agentId: AgentId }))
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Struct({ webhooks: Schema.Array(WebhookSubscription) })))
      .annotate(OpenApi.Summary, "The agent's webhooks (secrets are never shown again)")
  )
  .add(
    HttpApiEndpoint.patch("update", "/:id")
      .setPath(WebhookPath)
      .setPayload(UpdateWebhookRequest)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Struct({ id: Schema.String, updated: Schema.Boolean })))
      .annotate(OpenApi.Summary, "Change url, events or isActive")
  )
  .add(
    HttpApiEndpoint.del("remove", "/:id")
      .setPath(WebhookPath)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Struct({ deleted: Schema.Boolean })))
      .annotate(OpenApi.Summary, "Delete a webhook")
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/:id/rotate-secret")
      .setPath(WebhookPath)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Struct({ id: Schema.String, secret: Schema.String, message: Schema.String })))
      .annotate(OpenApi.Summary, "A new signing secret, shown once; the old one stops at once")
  )
  .add(
    HttpApiEndpoint.post("test", "/:id/test")
      .setPath(WebhookPath)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Struct({ success: Schema.Boolean, status: Schema.Number, message: Schema.String })))
      .annotate(OpenApi.Summary, "Send one signed `webhook.test` event now (not retried, not logged as a delivery)")
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/:id/deliveries")
      .setPath(WebhookPath)
      .setUrlParams(PageQuery)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(DeliveryList))
      .annotate(OpenApi.Summary, "The webhook's deliveries, newest first")
  )
  .add(
    HttpApiEndpoint.get("logs", "/:id/deliveries/:deliveryId/logs")
      .setPath(Schema.Struct({ ...WebhookPath.fields, deliveryId: Schema.String.pipe(Schema.maxLength(80)) }))
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(DeliveryLogs))
      .annotate(OpenApi.Summary, "One delivery with every attempt (status, body excerpt, error, time)")
  )
  .add(
    HttpApiEndpoint.get("deadLetters", "/:id/dead-letter")
      .setPath(WebhookPath)
      .setUrlParams(PageQuery)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(DeadLetterList))
      .annotate(OpenApi.Summary, "Deliveries that failed 5 attempts")
  )
  .add(
    HttpApiEndpoint.post("requeue", "/:id/dead-letter/:dlqId/requeue")
      .setPath(Schema.Struct({ ...WebhookPath.fields, dlqId: Schema.String.pipe(Schema.maxLength(80)) }))
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Struct({ message: Schema.String, newDeliveryId: Schema.String, originalDlqId: Schema.String })))
      .annotate(OpenApi.Summary, "Send a dead-lettered delivery again (a new delivery, same event and body)")
  )
  .addError(UnauthorizedResponse)
  .addError(ForbiddenResponse)
  .addError(ConflictResponse)
  .prefix("/api/v1/webhooks") {}
