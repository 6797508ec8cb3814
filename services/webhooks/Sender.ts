// The one sender of webhook deliveries and execution callbacks: due deliveries are leased, posted over the guarded
// outbound pool (the address checked again when the socket connects), one attempt at a time within its time limit, and
// each outcome is logged and stepped through the delivery's machine in one transaction, together with the outcomes of
// other posts that finished meanwhile (Recorder.ts). A pass resolves its deliveries' targets together.
import { Clock, Config, Effect, Either } from "effect"
import { request } from "undici"
import { causes, errorCode } from "../../layers/outbound/errors.js"
import { BlockedAddressError, OutboundPool } from "../../layers/outbound/Pool.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { MachineHost } from "../../machines/Host.js"
import { DeliveriesRepo, type DeliveryRow } from "./DeliveriesRepo.js"
import { type AttemptResult, judged, makeRecorder } from "./Recorder.js"
import { WebhookSecrets } from "./Secrets.js"
import { deliveryHeaders } from "./signing.js"
import { DeliveryTargets, type Target } from "./Targets.js"
import { withSpan } from "../../layers/observability/span.js"

export type { AttemptResult } from "./Recorder.js"

/** The spec's response limit per attempt (connect, headers and the read body excerpt). */
export const ATTEMPT_TIMEOUT_MS = 10_000
/** A claimed delivery is leased for the attempt's limit plus this margin (to record the outcome) before another pass may take it. */
export const LEASE_MARGIN_MS = 5_000
const RESPONSE_EXCERPT_BYTES = 1_024
/** Deliveries one pass claims (and posts 8 at a time); the worker runs passes back to back while they come back full. */
export const SEND_BATCH = 20

/**
 * WEBHOOK_ATTEMPT_TIMEOUT_MS: the attempt limit (and with it the lease). Not user-facing: the spec's 10 s is the default
 * and the maximum; tests that kill a process mid-delivery shorten it so the lease runs out in seconds.
 */
const attemptTimeoutMs = Config.integer("WEBHOOK_ATTEMPT_TIMEOUT_MS").pipe(
  Config.withDefault(ATTEMPT_TIMEOUT_MS),
  Config.validate({ message: "WEBHOOK_ATTEMPT_TIMEOUT_MS must be between 500 and 10000", validation: (n) => n >= 500 && n <= ATTEMPT_TIMEOUT_MS })
)

/** What went wrong with one attempt, for its log: the guard's refusal when there is one (undici wraps it). */
const describeFailure = (error: unknown): string => {
  for (const e of causes(error)) {
    if (e instanceof BlockedAddressError) return e.message
  }
  const code = errorCode(error)
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  return `${code !== undefined && !text.includes(code) ? `${code}: ` : ""}${text}`.slice(0, 500)
}

export class Sender extends Effect.Service<Sender>()("webhooks/Sender", {
  scoped: Effect.gen(function* () {
    const deliveries = yield* DeliveriesRepo
    const targets = yield* DeliveryTargets
    const secrets = yield* WebhookSecrets
    const host = yield* MachineHost
    const pool = yield* OutboundPool
    const urlGuard = yield* UrlGuard
    const timeoutMs = yield* attemptTimeoutMs
    const leaseMs = timeoutMs + LEASE_MARGIN_MS
    const recorder = yield* makeRecorder

    /** One POST; a non-2xx is an answer here (the caller decides), a timeout, refused address or TLS error a Left. */
    const post = (url: string, headers: Record<string, string>, body: string, attempt: number) =>
      Effect.gen(function* () {
        const started = yield* Clock.currentTimeMillis
        const outcome = yield* urlGuard.check(url).pipe(
          Effect.mapError((rejected) => rejected.reason),
          Effect.zipRight(Effect.tryPromise({
            try: async (interrupted) => {
              const response = await request(url, {
                dispatcher: pool.dispatcher,
                method: "POST",
                signal: AbortSignal.any([interrupted, AbortSignal.timeout(timeoutMs)]),
                headersTimeout: timeoutMs,
                bodyTimeout: timeoutMs,
                headers,
                body
              })
              const chunks: Array<Buffer> = []
              let size = 0
              for await (const chunk of response.body) {
                const buffer = Buffer.from(chunk)
                if (size < RESPONSE_EXCERPT_BYTES) chunks.push(buffer.subarray(0, RESPONSE_EXCERPT_BYTES - size))
                size += buffer.length
                if (size >= RESPONSE_EXCERPT_BYTES) break
              }
              return { status: response.statusCode, body: Buffer.concat(chunks).toString("utf8") }
            },
            catch: describeFailure
          })),
          Effect.either
        )
        const at = yield* Clock.currentTimeMillis
        return { attempt, at, elapsed: Math.max(0, Math.round(at - started)), outcome } satisfies AttemptResult
      })

    /**
     * One claimed delivery: sent to its target and recorded, left waiting, or superseded. `known`: its target as the pass
     * resolved it; read again when there is none, or when the pass saw its subscription fail (that may have switched it
     * off: the 10th failure in a row).
     */
    const send = (delivery: DeliveryRow, known: Target | undefined, failing: Set<string>) =>
      Effect.gen(function* () {
        const stale = known === undefined || (delivery.subscriptionId !== null && failing.has(delivery.subscriptionId))
        const target = stale ? yield* targets.resolve(delivery) : known
        if (target._tag === "Wait") return
        if (target._tag === "Supersede") {
          const at = yield* Clock.currentTimeMillis
          return yield* Effect.asVoid(host.deliverNow("webhookDelivery", delivery.id, { type: "SUPERSEDED", at, by: target.by }))
        }
        const attempt = delivery.attemptCount + 1
        const headers = target.headers(attempt, yield* Clock.currentTimeMillis)
        const result = yield* post(target.url, headers, delivery.body, attempt)
        yield* recorder.record(delivery, result)
        if (!judged(result).ok && delivery.subscriptionId !== null) failing.add(delivery.subscriptionId)
      })

    /** One pass over due deliveries of both kinds (leased: another process skips them while this one posts). */
    const sendDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* deliveries.claimDue(now, leaseMs, SEND_BATCH)
      const resolved = yield* targets.resolveAll(due).pipe(
        Effect.catchAllCause((cause) =>
          Effect.as(Effect.logWarning(`resolving the targets of ${due.length} deliveries together failed; each is resolved on its own`, cause), new Map<string, Target>())
        )
      )
      const failing = new Set<string>()
      yield* Effect.forEach(due, (delivery) =>
        send(delivery, resolved.get(delivery.id), failing).pipe(
          Effect.catchAllCause((cause) => Effect.logError(`delivery ${delivery.id} failed; retried after its lease`, cause))
        ), { concurrency: 8, discard: true })
      return due.length
    }).pipe(withSpan("Sender.sendDue"))

    /** POST /webhooks/:id/test: one signed `webhook.test` post now, not retried and not recorded as a delivery. */
    const sendTest = (sub: { readonly id: string; readonly agentId: string; readonly url: string; readonly secretEncrypted: string }) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const body = JSON.stringify({ event: "webhook.test", timestamp: new Date(at).toISOString(), data: { webhookId: sub.id, agentId: sub.agentId, message: "test delivery" } })
        const headers = deliveryHeaders({ secret: secrets.decrypt(sub.secretEncrypted), subscriptionId: sub.id, deliveryId: `del_test_${at.toString(36)}`, eventType: "webhook.test", attempt: 1, body, at })
        const { outcome } = yield* post(sub.url, headers, body, 1)
        if (Either.isLeft(outcome)) return { success: false, status: 0, message: `the test delivery failed: ${outcome.left}` }
        const ok = outcome.right.status >= 200 && outcome.right.status < 300
        return { success: ok, status: outcome.right.status, message: ok ? "the endpoint answered 2xx" : `the endpoint answered ${outcome.right.status}` }
      })

    return { sendDue, sendTest, leaseMs } as const
  }),
  dependencies: [DeliveriesRepo.Default, DeliveryTargets.Default, WebhookSecrets.Default, MachineHost.Default, OutboundPool.Default, UrlGuard.Default]
}) {}
