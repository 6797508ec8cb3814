// Typed errors: every failure of the service (`{success:false, error:{code, message, details}}`) becomes one of these
// classes, carrying the service's code, HTTP status and details (docs/errors.md lists the codes).

/** A failure answered by the marketplace, or refused by the SDK before anything was sent. */
export class MarketplaceError extends Error {
  override readonly name: string = "MarketplaceError"
  constructor(
    /** The service's error code, e.g. `INSUFFICIENT_BALANCE` (or an `SDK_…` code for a refusal made locally). */
    readonly code: string,
    message: string,
    /** The HTTP status (0 when nothing reached the service). */
    readonly status: number,
    /** The envelope's `details` (e.g. `{issues}` for VALIDATION_ERROR, `{reason}` for a refused payment). */
    readonly details?: unknown
  ) {
    super(message)
  }
}

/** 400: the body, path, query or a header did not validate (`details.issues`), or a chain limit (DEPTH_LIMIT, …). */
export class ValidationError extends MarketplaceError {
  override readonly name = "ValidationError"
}
/** 401: a wallet signature, chain token, client id or proof is missing, malformed, stale, reused or wrong. */
export class AuthenticationError extends MarketplaceError {
  override readonly name = "AuthenticationError"
}
/** 402: payment required or refused (`details.reason`, e.g. `payment_already_used`), or a chain's budget is short. */
export class PaymentError extends MarketplaceError {
  override readonly name = "PaymentError"
}
/** 403: not allowed (suspended agent, chaining disabled, a payout that needs an EIP-712 authorization, …). */
export class ForbiddenError extends MarketplaceError {
  override readonly name = "ForbiddenError"
}
/** 404: no such agent, execution, transaction, chain, dispute or webhook. */
export class NotFoundError extends MarketplaceError {
  override readonly name = "NotFoundError"
}
/** 409: the state forbids it (insufficient balance, already registered, idempotency conflict, …). */
export class ConflictError extends MarketplaceError {
  override readonly name = "ConflictError"
}
/** 429: rate limited; `retryAfterSeconds` from `Retry-After` when given. */
export class RateLimitError extends MarketplaceError {
  override readonly name = "RateLimitError"
  retryAfterSeconds: number | undefined = undefined
}
/** 502/504: the agent failed or timed out (EXECUTION_FAILED, EXECUTION_TIMEOUT); `details` says how. */
export class ExecutionError extends MarketplaceError {
  override readonly name = "ExecutionError"
}
/** 503 and other 5xx: the service or the agent is unavailable for now (AGENT_UNAVAILABLE, SERVICE_UNAVAILABLE). */
export class UnavailableError extends MarketplaceError {
  override readonly name = "UnavailableError"
}

const byStatus = (status: number): typeof MarketplaceError => {
  if (status === 400 || status === 413 || status === 408) return ValidationError
  if (status === 401) return AuthenticationError
  if (status === 402) return PaymentError
  if (status === 403) return ForbiddenError
  if (status === 404) return NotFoundError
  if (status === 409) return ConflictError
  if (status === 429) return RateLimitError
  if (status === 502 || status === 504) return ExecutionError
  if (status >= 500) return UnavailableError
  return MarketplaceError
}

/** The typed error for a failed answer: its status, and its envelope when the body is one. */
export const errorFromResponse = (status: number, body: unknown, retryAfter?: string | null): MarketplaceError => {
  const error = typeof body === "object" && body !== null && "error" in body ? body.error : undefined
  const fields = typeof error === "object" && error !== null ? (error as { code?: unknown; message?: unknown; details?: unknown }) : {}
  const code = typeof fields.code === "string" ? fields.code : `HTTP_${status}`
  const message = typeof fields.message === "string" ? fields.message : `the marketplace answered HTTP ${status}`
  const Class = byStatus(status)
  const made = new Class(code, message, status, fields.details)
  if (made instanceof RateLimitError && retryAfter !== undefined && retryAfter !== null && /^\d+$/.test(retryAfter)) {
    made.retryAfterSeconds = Number(retryAfter)
  }
  return made
}
