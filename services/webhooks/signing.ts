// The headers of a webhook POST, both from the one whsec_ secret: the spec's (X-Webhook-Signature: sha256=<hex HMAC of
// the body>, keyed with the secret exactly as it was returned) and Standard Webhooks' (webhook-id, webhook-timestamp,
// webhook-signature: v1,<base64 HMAC of "id.timestamp.body">, keyed with the bytes the base64 after whsec_ decodes to,
// as that standard defines); and those of an execution's callback post, keyed from the client's payment header.
import { createHmac } from "node:crypto"

/** Standard Webhooks' key: the bytes of the base64 after `whsec_` (what `standardwebhooks` and `svix` use). */
export const standardKey = (secret: string) => Buffer.from(secret.replace(/^whsec_/, ""), "base64")

/**
 * The spec's key: "the subscription secret", the string as it was returned (`whsec_` included, UTF-8), so the receiver
 * the spec describes (`createHmac("sha256", secret)`) verifies without knowing the Standard Webhooks encoding.
 */
export const specKey = (secret: string) => Buffer.from(secret, "utf8")

/** `sha256=` + lowercase hex HMAC-SHA256 of the raw body (the spec's X-Webhook-Signature). */
const specSignature = (key: Buffer | string, body: string) => `sha256=${createHmac("sha256", key).update(body).digest("hex")}`

export const deliveryHeaders = (input: {
  readonly secret: string
  readonly subscriptionId: string
  readonly deliveryId: string
  readonly eventType: string
  readonly attempt: number
  readonly body: string
  readonly at: number
}): Record<string, string> => {
  const timestamp = String(Math.floor(input.at / 1000))
  return {
    "content-type": "application/json",
    "user-agent": "service-webhooks/1.0",
    "x-webhook-signature": specSignature(specKey(input.secret), input.body),
    "x-webhook-id": input.subscriptionId,
    "x-webhook-event": input.eventType,
    "x-webhook-delivery-id": input.deliveryId,
    "x-webhook-attempt": String(input.attempt),
    "webhook-id": input.deliveryId,
    "webhook-timestamp": timestamp,
    "webhook-signature": `v1,${createHmac("sha256", standardKey(input.secret)).update(`${input.deliveryId}.${timestamp}.${input.body}`).digest("base64")}`
  }
}

/**
 * The headers of an execution's callback post (docs/decisions/callbacks.md): the spec's headers, signed
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
export const callbackSignature = (key: string, body: string) => specSignature(key, body)
