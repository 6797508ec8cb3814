// Payment headers decoded, bounded before anything recursive touches them (length, then JSON depth, then schema): the
// shared base64-JSON reader and the x402 v1 X-PAYMENT codec (v2's PAYMENT-SIGNATURE codec is in v2.ts).
import { Effect, ParseResult, Schema } from "effect"
import { jsonNestingDepth, MAX_JSON_DEPTH } from "../../src/domain/Json.js"
import { PaymentPayload, PaymentRejected } from "./payment.js"

/**
 * A real exact-scheme payment header is under 1 KiB in v1 and about 2 KiB in v2 (which echoes the requirements, the
 * resource and the extensions); anything far larger is refused before it is decoded. Node refuses header blocks over
 * 16 KiB on its own.
 */
export const MAX_PAYMENT_HEADER_LENGTH = 8 * 1024

export const invalidPayload = (message: string, details?: Record<string, unknown>) =>
  new PaymentRejected({ reason: "invalid_payload", message, ...(details === undefined ? {} : { details }) })

/**
 * Reads a base64 (or base64url) JSON header named `name`, bounded before anything recursive touches it: its length,
 * then the JSON's nesting depth (a linear scan), then the parse.
 */
export const decodeBase64Json = (header: string, name: string): Effect.Effect<unknown, PaymentRejected> =>
  Effect.gen(function* () {
    const trimmed = header.trim()
    if (trimmed.length > MAX_PAYMENT_HEADER_LENGTH) {
      return yield* invalidPayload(`${name} is longer than ${MAX_PAYMENT_HEADER_LENGTH} characters`)
    }
    const text = Buffer.from(trimmed, "base64").toString("utf8")
    if (jsonNestingDepth(text) > MAX_JSON_DEPTH) {
      return yield* invalidPayload(`${name} nests deeper than ${MAX_JSON_DEPTH} levels`)
    }
    return yield* Effect.try({ try: (): unknown => JSON.parse(text), catch: () => invalidPayload(`${name} is not base64-encoded JSON`) })
  })

/** Decodes `json` with `schema`, refusing it as invalid_payload with the first few issues. */
export const decodeWith = <A, I>(schema: Schema.Schema<A, I>, json: unknown, message: string): Effect.Effect<A, PaymentRejected> =>
  Schema.decodeUnknown(schema)(json).pipe(
    Effect.mapError((error) =>
      invalidPayload(message, {
        issues: ParseResult.ArrayFormatter.formatErrorSync(error).slice(0, 5).map((i) => ({ path: i.path.join("."), message: i.message.slice(0, 200) }))
      })
    )
  )

/** Decodes an x402 v1 X-PAYMENT header (base64 JSON of an exact EVM payment payload). */
export const decodePaymentHeader = (header: string): Effect.Effect<PaymentPayload, PaymentRejected> =>
  Effect.flatMap(decodeBase64Json(header, "X-PAYMENT"), (json) =>
    decodeWith(PaymentPayload, json, "X-PAYMENT does not hold an x402 v1 exact EVM payment payload"))
