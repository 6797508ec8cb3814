// The headers of a webhook POST: the spec's (X-Webhook-Signature: sha256=<hex HMAC of the body>) and Standard Webhooks'
// (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC of "id.timestamp.body">), from one whsec_ secret.
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
