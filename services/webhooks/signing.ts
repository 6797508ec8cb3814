// The headers of a webhook POST: the spec's (X-Webhook-Signature: sha256=<hex HMAC of the body>) and Standard Webhooks'
// (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC of "id.timestamp.body">), from one whsec_ secret;
// and those of an execution's callback post, keyed from the client's payment header.
import { createHmac } from "node:crypto"

/** The key bytes of a `whsec_` secret (Standard Webhooks: base64 after the prefix). */
export const secretKey = (secret: string) => Buffer.from(secret.replace(/^whsec_/, ""), "base64")

export const deliveryHeaders = (input: {
  readonly secret: string
  readonly subscriptionId: string
  readonly deliveryId: string
  readonly eventType: string
  readonly attempt: number
  readonly body: string
  readonly at: number
}): Record<string, string> => {
  const key = secretKey(input.secret)
  const timestamp = String(Math.floor(input.at / 1000))
  return {
    "content-type": "application/json",
    "user-agent": "service-webhooks/1.0",
    "x-webhook-signature": `sha256=${createHmac("sha256", key).update(input.body).digest("hex")}`,
    "x-webhook-id": input.subscriptionId,
    "x-webhook-event": input.eventType,
    "x-webhook-delivery-id": input.deliveryId,
    "x-webhook-attempt": String(input.attempt),
    "webhook-id": input.deliveryId,
    "webhook-timestamp": timestamp,
    "webhook-signature": `v1,${createHmac("sha256", key).update(`${input.deliveryId}.${timestamp}.${input.body}`).digest("base64")}`
  }
}

/**
 * The headers of an execution's callback post (docs/decisions.md "Executions"): the spec's headers, signed
 * `sha256=<hex HMAC-SHA256 of the body>` keyed with the hex SHA-256 of the X-PAYMENT value the client sent (as text);
 * `X-Webhook-Id` is the execution. No Standard Webhooks headers: there is no whsec_ secret.
 */
export const callbackHeaders = (input: {
  readonly key: string
  readonly executionId: string
  readonly deliveryId: string
  readonly eventType: string
  readonly attempt: number
  readonly body: string
}): Record<string, string> => ({
  "content-type": "application/json",
  "user-agent": "service-webhooks/1.0",
  "x-webhook-signature": callbackSignature(input.key, input.body),
  "x-webhook-id": input.executionId,
  "x-webhook-event": input.eventType,
  "x-webhook-delivery-id": input.deliveryId,
  "x-webhook-attempt": String(input.attempt)
})

/** `sha256=` + hex HMAC-SHA256 of the raw body with the callback key (the hex SHA-256 of the X-PAYMENT header). */
export const callbackSignature = (key: string, body: string) => `sha256=${createHmac("sha256", key).update(body).digest("hex")}`
