// The X-PAYMENT header decoded, bounded before anything recursive touches it (length, then JSON depth, then schema).
import { Effect, ParseResult, Schema } from "effect"
import { jsonNestingDepth, MAX_JSON_DEPTH } from "../../src/domain/Json.js"
import { PaymentPayload, PaymentRejected } from "./payment.js"

/** A real x402 v1 exact payment header is under 1 KiB; anything far larger is refused before it is decoded. */
export const MAX_PAYMENT_HEADER_LENGTH = 8 * 1024

const invalidPayload = (message: string, details?: Record<string, unknown>) =>
  new PaymentRejected({ reason: "invalid_payload", message, ...(details === undefined ? {} : { details }) })

/**
 * Decodes a base64 (or base64url) JSON X-PAYMENT header, bounded before anything recursive touches it: its length,
 * then the JSON's nesting depth (a linear scan), then the parse and the schema.
 */
export const decodePaymentHeader = (header: string): Effect.Effect<PaymentPayload, PaymentRejected> =>
  Effect.gen(function* () {
    const trimmed = header.trim()
    if (trimmed.length > MAX_PAYMENT_HEADER_LENGTH) {
      return yield* invalidPayload(`X-PAYMENT is longer than ${MAX_PAYMENT_HEADER_LENGTH} characters`)
    }
    const text = Buffer.from(trimmed, "base64").toString("utf8")
    if (jsonNestingDepth(text) > MAX_JSON_DEPTH) {
      return yield* invalidPayload(`X-PAYMENT nests deeper than ${MAX_JSON_DEPTH} levels`)
    }
    const json = yield* Effect.try({ try: (): unknown => JSON.parse(text), catch: () => invalidPayload("X-PAYMENT is not base64-encoded JSON") })
    return yield* Schema.decodeUnknown(PaymentPayload)(json).pipe(
      Effect.mapError((error) =>
        invalidPayload("X-PAYMENT does not hold an x402 v1 exact EVM payment payload", {
          issues: ParseResult.ArrayFormatter.formatErrorSync(error).slice(0, 5).map((i) => ({ path: i.path.join("."), message: i.message.slice(0, 200) }))
        })
      )
    )
  })
