// The x402 v2 `payment-identifier` extension: the server's declaration in PAYMENT-REQUIRED and the payer's id read back
// from a payment payload (an idempotency key: a repeat with the same id is the same purchase).
import { Either } from "effect"
import { invalidPayload } from "./header.js"
import type { PaymentRejected } from "./payment.js"

export const PAYMENT_IDENTIFIER = "payment-identifier"

/** The id's format (x402 spec: 16-128 characters, letters, digits, hyphens and underscores). */
const PAYMENT_ID = /^[A-Za-z0-9_-]{16,128}$/

/** What a route that honours the extension declares (optional for the payer). */
export const paymentIdentifierDeclaration = {
  info: { required: false },
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: { id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" } },
    required: ["id"]
  }
} as const

/**
 * The payer's id from a v2 payload's `extensions`: none when the extension is absent or only echoes our declaration
 * (no `info.id`); an id that breaks the format is refused rather than ignored, so a payer never believes a purchase is
 * idempotent when it is not.
 */
export const paymentIdentifierOf = (extensions: Readonly<Record<string, unknown>> | undefined): Either.Either<string | undefined, PaymentRejected> => {
  const extension = extensions?.[PAYMENT_IDENTIFIER]
  if (typeof extension !== "object" || extension === null || !("info" in extension)) return Either.right(undefined)
  const info = extension.info
  if (typeof info !== "object" || info === null || !("id" in info) || info.id === undefined) return Either.right(undefined)
  const id = info.id
  return typeof id === "string" && PAYMENT_ID.test(id)
    ? Either.right(id)
    : Either.left(invalidPayload("the payment-identifier id must be 16-128 characters of letters, digits, '-' and '_'", { extension: PAYMENT_IDENTIFIER }))
}
