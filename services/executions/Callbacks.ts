// Result posts to an execution's callbackUrl/webhookUrl over the guarded outbound pool, signed like webhooks and retried until delivered (5 attempts).
import { SqlClient } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { createHmac } from "node:crypto"
import { request } from "undici"
import { causes, errorCode } from "../../layers/outbound/errors.js"
import { BlockedAddressError, OutboundPool } from "../../layers/outbound/Pool.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { newId } from "../../src/domain/Ids.js"

export const CALLBACK_MAX_ATTEMPTS = 5
/** Connect, headers and body of one attempt. */
const CALLBACK_TIMEOUT_MS = 10_000
/** The receiver's answer is read off up to this size (so the socket can be reused) and otherwise dropped. */
const CALLBACK_RESPONSE_MAX_BYTES = 16 * 1024
/** Delay before attempt n+1 after n failures: 1 s, 2 s, 4 s, 8 s. */
const backoffMs = (failures: number) => Math.min(1_000 * 2 ** (failures - 1), 300_000)

const Due = Schema.Struct({
  id: Schema.String,
  executionId: Schema.String,
  url: Schema.String,
  eventType: Schema.String,
  payload: Schema.Unknown,
  attempts: Schema.Number,
  secret: Schema.String
})

/** What went wrong with one attempt, as stored in last_error: the guard's refusal when there is one. */
const describeFailure = (error: unknown): string => {
  for (const e of causes(error)) {
    if (e instanceof BlockedAddressError) return e.message
  }
  const code = errorCode(error)
  return `${code !== undefined ? `${code}: ` : ""}${error instanceof Error ? error.message : String(error)}`.slice(0, 500)
}

/** `sha256=` + hex HMAC-SHA256 of the raw body; the key is the hex sha256 of the X-PAYMENT header the client sent. */
export const callbackSignature = (secret: string, body: string) => `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`

export class Callbacks extends Effect.Service<Callbacks>()("Callbacks", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const urlGuard = yield* UrlGuard
    const pool = yield* OutboundPool

    /** Registers the URL when the execution is created (inside its transaction). */
    const armStatement = (executionId: string, url: string) =>
      sql`INSERT INTO execution_callbacks ${sql.insert({ id: newId("cb"), executionId, url, status: "waiting" })}`

    /** The result is ready: (re)queue the post with this body. Inside the transaction that produced the result. */
    const ready = (executionId: string, eventType: string, payload: Record<string, unknown>) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`UPDATE execution_callbacks SET status = 'pending', event_type = ${eventType}, payload = ${JSON.stringify(payload)},
            attempts = 0, next_attempt_at = ${new Date(now)} WHERE execution_id = ${executionId}`).pipe(Effect.asVoid)

    /** One POST over the guarded pool: the name is checked again when the socket connects, the answer read within bounds. */
    const post = (due: typeof Due.Type, body: string, attempt: number) =>
      Effect.tryPromise({
        try: async (interrupted) => {
          const response = await request(due.url, {
            dispatcher: pool.dispatcher,
            method: "POST",
            signal: AbortSignal.any([interrupted, AbortSignal.timeout(CALLBACK_TIMEOUT_MS)]),
            headersTimeout: CALLBACK_TIMEOUT_MS,
            bodyTimeout: CALLBACK_TIMEOUT_MS,
            headers: {
              "content-type": "application/json",
              "user-agent": "service-webhooks/1.0",
              "x-webhook-signature": callbackSignature(due.secret, body),
              "x-webhook-id": due.executionId,
              "x-webhook-event": due.eventType,
              "x-webhook-delivery-id": due.id,
              "x-webhook-attempt": String(attempt)
            },
            body
          })
          // Only the status matters; a bigger answer drops the socket instead of being read.
          await response.body.dump({ limit: CALLBACK_RESPONSE_MAX_BYTES })
          return response.statusCode
        },
        catch: describeFailure
      })

    const deliver = (due: typeof Due.Type) =>
      Effect.gen(function* () {
        const body = JSON.stringify(due.payload)
        const attempt = due.attempts + 1
        const outcome = yield* urlGuard.check(due.url).pipe(
          Effect.mapError((rejected) => rejected.reason),
          Effect.zipRight(post(due, body, attempt)),
          Effect.match({
            onFailure: (error) => ({ status: null, error }),
            onSuccess: (status) => ({ status, error: null })
          })
        )
        const now = yield* Clock.currentTimeMillis
        const delivered = outcome.status !== null && outcome.status >= 200 && outcome.status < 300
        const exhausted = !delivered && attempt >= CALLBACK_MAX_ATTEMPTS
        yield* sql`UPDATE execution_callbacks SET ${sql.update({
          status: delivered ? "delivered" : exhausted ? "failed" : "pending",
          attempts: attempt,
          lastStatus: outcome.status,
          lastError: outcome.error,
          nextAttemptAt: new Date(now + backoffMs(attempt)),
          ...(delivered ? { deliveredAt: new Date(now) } : {})
        })} WHERE id = ${due.id}`
      })

    /** One pass over due callbacks; the lease (next_attempt_at) keeps processes from posting twice at once. */
    const processDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql`
        WITH claimed AS (
          UPDATE execution_callbacks SET next_attempt_at = ${new Date(now + CALLBACK_TIMEOUT_MS + 5_000)}
          WHERE id IN (SELECT id FROM execution_callbacks WHERE status = 'pending' AND next_attempt_at <= ${new Date(now)}
                       ORDER BY next_attempt_at LIMIT 20 FOR UPDATE SKIP LOCKED)
          RETURNING *)
        SELECT c.id, c.execution_id, c.url, c.event_type, c.payload, c.attempts, p.header_sha256 AS secret
        FROM claimed c JOIN executions e ON e.id = c.execution_id JOIN payments p ON p.id = e.payment_id`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(Due))),
        Effect.orDie
      )
      yield* Effect.forEach(due, deliver, { concurrency: 8, discard: true })
      return due.length
    }).pipe(Effect.withSpan("Callbacks.processDue"))

    return { armStatement, ready, processDue } as const
  }),
  dependencies: [UrlGuard.Default, OutboundPool.Default]
}) {}

export const CallbacksWorkerLive = Layer.scopedDiscard(
  Effect.flatMap(Callbacks, (callbacks) =>
    callbacks.processDue.pipe(
      Effect.catchAllCause((cause) => Effect.logError("callback pass failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(500))),
      Effect.forkScoped
    ))
)
