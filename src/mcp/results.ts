// Tool errors: a failed tool call is a result with `isError: true` whose text is the HTTP API's error envelope, with the
// same codes (src/domain/Errors.ts); a defect never escapes (INTERNAL_ERROR, or SERVICE_UNAVAILABLE for the database).
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { SqlError } from "@effect/sql"
import { Cause, Effect, Option } from "effect"
import type { PaymentRequiredV2 } from "../../layers/x402/v2.js"
import { type Details, type ErrorCode, PaymentRequired } from "../domain/Errors.js"

/** Any of the API's declared errors (every one carries its code), or the x402 challenge. */
export interface ApiFailure {
  readonly code: ErrorCode
  readonly message: string
  readonly details?: Details
}

/**
 * A paid tool's payment challenge or refusal in x402 v2 terms (the Paywall's `challengeV2` of the PaymentRequired), so
 * the result carries it as x402's MCP transport says.
 */
export class X402Challenge {
  constructor(readonly paymentRequired: PaymentRequiredV2, readonly message: string) {}
}

/** A failure whose result also carries `_meta` (a paid call that failed after settling: its receipt). */
export class FailureWithMeta {
  constructor(readonly failure: ApiFailure, readonly meta: Readonly<Record<string, unknown>>) {}
}

export type ToolFailure = ApiFailure | PaymentRequired | X402Challenge | FailureWithMeta

/**
 * The envelope goes in the text only, not in structuredContent: the SDK client validates any structuredContent against
 * the tool's outputSchema, even on an error result.
 */
export const errorResult = (code: ErrorCode, message: string, details?: Details): CallToolResult => ({
  isError: true,
  content: [{ type: "text", text: JSON.stringify({ success: false, error: { code, message, ...(details === undefined ? {} : { details }) } }) }]
})

/**
 * x402's MCP challenge (transports-v2/mcp.md): the v2 PaymentRequired in structuredContent (a paid tool's outputSchema
 * admits it) and, wrapped in `x402/error` with code 402, as the text.
 */
const paymentRequired = (challenge: X402Challenge): CallToolResult => ({
  isError: true,
  structuredContent: { ...challenge.paymentRequired },
  content: [{ type: "text", text: JSON.stringify({ "x402/error": { code: 402, message: challenge.message, data: challenge.paymentRequired } }) }]
})

/** A PaymentRequired that no paid tool turned into its x402 challenge: the plain error, requirements in details. */
const plainPaymentRequired = (error: PaymentRequired) =>
  errorResult("PAYMENT_REQUIRED", error.message, { ...error.details, accepts: error.accepts })

const declared = (error: ToolFailure): CallToolResult =>
  error instanceof X402Challenge
    ? paymentRequired(error)
    : error instanceof FailureWithMeta
    ? { ...declared(error.failure), _meta: { ...error.meta } }
    : error instanceof PaymentRequired
    ? plainPaymentRequired(error)
    : errorResult(error.code, error.message, error.details)

export const failureResult = (tool: string, cause: Cause.Cause<ToolFailure>): Effect.Effect<CallToolResult> => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return Effect.succeed(declared(failure.value))
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect) && defect.value instanceof SqlError.SqlError) {
    return Effect.logWarning(`MCP tool ${tool}: database unavailable`, cause).pipe(
      Effect.as(errorResult("SERVICE_UNAVAILABLE", "the database is not answering; try again shortly", { retryAfterSeconds: 5 }))
    )
  }
  if (Option.isNone(defect) && Cause.isInterruptedOnly(cause)) {
    return Effect.succeed(errorResult("INTERNAL_ERROR", "the call was cancelled"))
  }
  return Effect.logError(`MCP tool ${tool}: unhandled failure`, cause).pipe(
    Effect.as(errorResult("INTERNAL_ERROR", "internal error; nothing was charged that was not delivered", { tool }))
  )
}
