// Verifies a webhook delivery (docs/webhooks.md): both signatures the marketplace sends, made with the one `whsec_`
// secret, and the Standard Webhooks timestamp (a replay after 5 minutes is refused).
import { createHmac, timingSafeEqual } from "node:crypto"
import type { IncomingHeaders } from "./requestSignature.js"

export interface WebhookEvent<D = Record<string, unknown>> {
  /** e.g. `execution.completed`, `escrow.released`, `dispute.opened`, `withdrawal.completed`, `chain.completed`. */
  readonly event: string
  readonly timestamp: string
  readonly data: D
}

export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError"
}

const TOLERANCE_SECONDS = 5 * 60

const header = (headers: IncomingHeaders | Headers, name: string): string | undefined => {
  if (typeof Headers !== "undefined" && headers instanceof Headers) return headers.get(name) ?? undefined
  const record = headers as IncomingHeaders
  const value = record[name] ?? record[name.toLowerCase()] ?? Object.entries(record).find(([k]) => k.toLowerCase() === name)?.[1]
  return typeof value === "string" ? value : undefined
}

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b))

/**
 * Checks a delivery and returns its parsed event; throws WebhookVerificationError when either signature is missing or
 * wrong, or `webhook-timestamp` is more than 5 minutes away from now. `rawBody`: the bytes received, before parsing.
 *
 * @example
 * // node:http, Express (`express.raw({ type: "application/json" })`), Fastify (raw body)…
 * const event = webhooks.verify(rawBody, req.headers, process.env.WEBHOOK_SECRET!) // "whsec_…", as returned
 * if (event.event === "withdrawal.completed") console.log(event.data.txHash)
 */
export const verify = <D = Record<string, unknown>>(
  rawBody: string | Uint8Array,
  headers: IncomingHeaders | Headers,
  secret: string,
  now: number = Date.now()
): WebhookEvent<D> => {
  if (!secret.startsWith("whsec_")) throw new WebhookVerificationError("the secret must be the whsec_… value returned when the webhook was created")
  const body = typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : Buffer.from(rawBody)
  // X-Webhook-Signature: sha256= + hex HMAC-SHA256 of the body, keyed with the secret text as returned.
  const spec = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`
  if (!sameText(header(headers, "x-webhook-signature") ?? "", spec)) throw new WebhookVerificationError("X-Webhook-Signature does not match")
  // Standard Webhooks: v1,<base64 HMAC-SHA256 of "id.timestamp.body">, keyed with the bytes after whsec_.
  const id = header(headers, "webhook-id")
  const timestamp = header(headers, "webhook-timestamp")
  const signatures = header(headers, "webhook-signature")
  if (id === undefined || timestamp === undefined || signatures === undefined) throw new WebhookVerificationError("Standard Webhooks headers are missing")
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(now / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) {
    throw new WebhookVerificationError("webhook-timestamp is too old or too far in the future")
  }
  const key = Buffer.from(secret.slice("whsec_".length), "base64")
  const expected = createHmac("sha256", key).update(Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body])).digest("base64")
  const matches = signatures.split(" ").some((part) => part.startsWith("v1,") && sameText(part.slice(3), expected))
  if (!matches) throw new WebhookVerificationError("webhook-signature does not match")
  let parsed: unknown
  try {
    parsed = JSON.parse(body.toString("utf8"))
  } catch {
    throw new WebhookVerificationError("the body is not JSON")
  }
  if (typeof parsed !== "object" || parsed === null || !("event" in parsed) || !("data" in parsed)) {
    throw new WebhookVerificationError("the body is not a webhook event")
  }
  return parsed as WebhookEvent<D>
}
