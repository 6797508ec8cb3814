// Fixed-window rate limits per agent and per client, and the operator console's failed logins per client address (a
// window sliding by minutes), shared by all server processes through PostgreSQL (rate_limit_windows).
import { SqlClient } from "@effect/sql"
import { Clock, Config, Duration, Effect, Layer, Option, Ref, Schedule } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import { RateLimited } from "../../src/domain/Errors.js"

/** What is left in both windows, as X-RateLimit-Agent-Remaining and X-RateLimit-Client-Remaining say. */
export interface Remaining {
  readonly agentRemaining: number
  readonly clientRemaining: number
}

/**
 * Where a request's handler learns what the windows said once they were counted (after a unit given back, what they say
 * then), whatever the request's outcome: success, failure or refusal. Services write it; only the handler makes headers.
 */
export type LimitsSeen = Ref.Ref<Option.Option<Remaining>>

export const noteLimits = (seen: LimitsSeen | undefined, remaining: Remaining) =>
  seen === undefined ? Effect.void : Ref.set(seen, Option.some(remaining))

export interface Window {
  readonly agentRemaining: number
  readonly clientRemaining: number
  /** Seconds until the window resets. */
  readonly resetSeconds: number
  readonly exceeded: boolean
}

/** A console login attempt: allowed (then `settle` says whether it failed), or refused for `retryAfterSeconds`. */
export type LoginAttempt =
  | { readonly allowed: true; readonly settle: (failed: boolean) => Effect.Effect<void> }
  | { readonly allowed: false; readonly retryAfterSeconds: number }

const LOGIN_PREFIX = "ops-login:"
/** The SQLSTATE `rate_window_count` (migrations/0035_one_statement_guards) raises over a window. */
const RATE_REFUSED = "RL429"

export class RateLimits extends Effect.Service<RateLimits>()("RateLimits", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const windowSeconds = yield* Config.integer("RATE_LIMIT_WINDOW_SECONDS").pipe(Config.withDefault(60))
    const agentLimit = yield* Config.integer("RATE_LIMIT_AGENT_PER_WINDOW").pipe(Config.withDefault(600))
    const clientLimit = yield* Config.integer("RATE_LIMIT_CLIENT_PER_WINDOW").pipe(Config.withDefault(120))
    const windowMs = windowSeconds * 1000

    const windowOf = (now: number) => new Date(Math.floor(now / windowMs) * windowMs)

    const remainingOf = (rows: ReadonlyArray<{ readonly key: string; readonly count: number }>) => {
      const count = (prefix: string) => rows.find((r) => r.key.startsWith(prefix))?.count ?? 0
      return { agentCount: count("agent:"), clientCount: count("client:") }
    }

    /** Counts one request against both windows (one statement) and says whether either is exceeded; noted in `seen`. */
    const consume = (agentId: string, client: string, seen?: LimitsSeen) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const start = windowOf(now)
        const rows = yield* sql<{ key: string; count: number }>`
          INSERT INTO rate_limit_windows (key, window_start, count)
          VALUES (${`agent:${agentId}`}, ${start}, 1), (${`client:${client}`}, ${start}, 1)
          ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
          RETURNING key, count`
        const { agentCount, clientCount } = remainingOf(rows)
        const window = {
          agentRemaining: Math.max(0, agentLimit - agentCount),
          clientRemaining: Math.max(0, clientLimit - clientCount),
          resetSeconds: Math.max(1, Math.ceil((start.getTime() + windowMs - now) / 1000)),
          exceeded: agentCount > agentLimit || clientCount > clientLimit
        } satisfies Window
        yield* noteLimits(seen, window)
        return window
      }).pipe(Effect.orDie, withSpan("RateLimits.consume"))

    /**
     * Gives the unit back (the request was refused before doing anything: bad payment, over quota); `seen` then holds
     * what the windows say after it.
     */
    const release = (agentId: string, client: string, seen?: LimitsSeen) =>
      Effect.gen(function* () {
        const start = windowOf(yield* Clock.currentTimeMillis)
        const rows = yield* sql<{ key: string; count: number }>`UPDATE rate_limit_windows SET count = count - 1
                   WHERE window_start = ${start} AND key IN (${`agent:${agentId}`}, ${`client:${client}`}) AND count > 0
                   RETURNING key, count`
        if (rows.length < 2) return
        const { agentCount, clientCount } = remainingOf(rows)
        yield* noteLimits(seen, { agentRemaining: Math.max(0, agentLimit - agentCount), clientRemaining: Math.max(0, clientLimit - clientCount) })
      }).pipe(Effect.orDie)

    const loginMaxFailures = yield* Config.integer("OPS_LOGIN_MAX_FAILURES").pipe(Config.withDefault(5))
    const loginWindowSeconds = yield* Config.integer("OPS_LOGIN_WINDOW_SECONDS").pipe(Config.withDefault(900))
    const loginWindowMs = loginWindowSeconds * 1000
    /** Failures are counted in buckets of a fifteenth of the window (a minute by default); the window slides by buckets. */
    const loginBucketMs = Math.max(1000, Math.floor(loginWindowMs / 15))

    /**
     * One console login attempt from `address`: counted before the token is checked (one statement, under the bucket
     * row's lock, so parallel guesses cannot all slip under the limit), then given back when it succeeded. Over the limit,
     * it is given back at once and refused until enough failures have aged out of the window (whatever the token).
     */
    const loginAttempt = (address: string): Effect.Effect<LoginAttempt> =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const key = `${LOGIN_PREFIX}${address}`
        const bucket = new Date(Math.floor(now / loginBucketMs) * loginBucketMs)
        const since = new Date(now - loginWindowMs)
        const rows = yield* sql<{ windowStart: Date; count: number }>`
          WITH bump AS (
            INSERT INTO rate_limit_windows (key, window_start, count) VALUES (${key}, ${bucket}, 1)
            ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
            RETURNING window_start, count)
          SELECT window_start, count FROM bump
          UNION ALL
          SELECT window_start, count FROM rate_limit_windows WHERE key = ${key} AND window_start > ${since} AND window_start <> ${bucket}
          ORDER BY window_start`
        const giveBack = sql`UPDATE rate_limit_windows SET count = count - 1 WHERE key = ${key} AND window_start = ${bucket} AND count > 0`.pipe(Effect.asVoid, Effect.orDie)
        const total = rows.reduce((sum, r) => sum + r.count, 0)
        if (total <= loginMaxFailures) return { allowed: true, settle: (failed: boolean) => (failed ? Effect.void : giveBack) } satisfies LoginAttempt
        yield* giveBack
        // Refused until the failures still in the window drop below the limit: the oldest buckets age out first.
        let remaining = total - 1
        let retryAt = now + loginWindowMs
        for (const row of rows) {
          const count = row.windowStart.getTime() === bucket.getTime() ? row.count - 1 : row.count
          remaining -= count
          if (remaining < loginMaxFailures) {
            retryAt = row.windowStart.getTime() + loginWindowMs
            break
          }
        }
        return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((retryAt - now) / 1000)) } satisfies LoginAttempt
      }).pipe(Effect.orDie, withSpan("RateLimits.loginAttempt"))

    const prune = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      yield* sql`DELETE FROM rate_limit_windows
                 WHERE (key LIKE ${`${LOGIN_PREFIX}%`} AND window_start <= ${new Date(now - loginWindowMs)})
                    OR (key NOT LIKE ${`${LOGIN_PREFIX}%`} AND window_start < ${new Date(now - 2 * windowMs)})`
    })

    const limits = { windowSeconds, agentLimit, clientLimit, loginMaxFailures, loginWindowSeconds }

    /**
     * One paid request against both windows, keyed on its verified payer: over either, the unit goes back and the
     * request is refused with nothing `spent`. Otherwise the give-back, for a refusal further on.
     */
    const admit = (agentId: string, client: string, seen: LimitsSeen | undefined, spent: "charged" | "reserved") =>
      Effect.gen(function* () {
        const window = yield* consume(agentId, client, seen)
        const giveBack = release(agentId, client, seen)
        if (!window.exceeded) return giveBack
        yield* giveBack
        return yield* new RateLimited({
          code: "RATE_LIMITED",
          message: `too many requests in the current window; nothing was ${spent}`,
          details: { retryAfterSeconds: window.resetSeconds, ...limits }
        })
      })

    /**
     * The paid call's count of both windows as the LAST statement of its reservation batch (its main query, run before
     * the batch's writes): over either window the whole reservation aborts with RL429 (`refusal`), counted nothing.
     */
    const countStatement = (agentId: string, client: string, now: number) =>
      sql<{ agentCount: number; clientCount: number }>`
        SELECT agent_count, client_count FROM rate_window_count(${`agent:${agentId}`}, ${`client:${client}`}, ${windowOf(now)}, ${agentLimit}, ${clientLimit})`

    /** What the windows say after `countStatement` counted the call, noted in `seen`. */
    const counted = (rows: ReadonlyArray<unknown>, seen: LimitsSeen | undefined) => {
      const row = rows[0]
      const agentCount = typeof row === "object" && row !== null && "agentCount" in row ? Number(row.agentCount) : 0
      const clientCount = typeof row === "object" && row !== null && "clientCount" in row ? Number(row.clientCount) : 0
      return noteLimits(seen, { agentRemaining: Math.max(0, agentLimit - agentCount), clientRemaining: Math.max(0, clientLimit - clientCount) })
    }

    /** What the windows say now, without counting (a refusal the reservation's statement made: it counted nothing). */
    const peek = (agentId: string, client: string, seen: LimitsSeen | undefined) =>
      seen === undefined ? Effect.void : Effect.gen(function* () {
        const start = windowOf(yield* Clock.currentTimeMillis)
        const rows = yield* sql<{ key: string; count: number }>`
          SELECT key, count FROM rate_limit_windows WHERE window_start = ${start} AND key IN (${`agent:${agentId}`}, ${`client:${client}`})`
        const { agentCount, clientCount } = remainingOf(rows)
        yield* noteLimits(seen, { agentRemaining: Math.max(0, agentLimit - agentCount), clientRemaining: Math.max(0, clientLimit - clientCount) })
      }).pipe(Effect.orDie)

    /** An RL429 of `countStatement`: the RATE_LIMITED refusal (the windows as they are, the call uncounted, in `seen`). */
    const refusal = (error: unknown, now: number, seen: LimitsSeen | undefined, spent: "charged" | "reserved") => {
      const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
      if (typeof cause !== "object" || cause === null || !("code" in cause) || cause.code !== RATE_REFUSED) return undefined
      let counts: { agentCount?: unknown; clientCount?: unknown } = {}
      try {
        counts = "detail" in cause && typeof cause.detail === "string" ? JSON.parse(cause.detail) : {}
      } catch {
        counts = {}
      }
      // The aborted statement counted nothing: what was left before this call.
      const left = (limit: number, count: unknown) => Math.max(0, limit - (Number(count ?? limit + 1) - 1))
      const start = windowOf(now)
      return Effect.zipRight(
        noteLimits(seen, { agentRemaining: left(agentLimit, counts.agentCount), clientRemaining: left(clientLimit, counts.clientCount) }),
        Effect.fail(new RateLimited({
          code: "RATE_LIMITED",
          message: `too many requests in the current window; nothing was ${spent}`,
          details: { retryAfterSeconds: Math.max(1, Math.ceil((start.getTime() + windowMs - now) / 1000)), ...limits }
        }))
      )
    }

    return {
      countStatement,
      counted,
      refusal,
      peek,
      consume,
      release,
      admit,
      loginAttempt,
      prune,
      limits
    } as const
  })
}) {}

export const RateLimitPruneLive = Layer.scopedDiscard(
  Effect.flatMap(RateLimits, (limits) =>
    limits.prune.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("rate limit pruning failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.minutes(1))),
      Effect.forkScoped
    ))
)
