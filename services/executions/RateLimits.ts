// Fixed-window rate limits per agent and per client, shared by all server processes through PostgreSQL.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Duration, Effect, Layer, Schedule } from "effect"

export interface Window {
  readonly agentRemaining: number
  readonly clientRemaining: number
  /** Seconds until the window resets. */
  readonly resetSeconds: number
  readonly exceeded: boolean
}

export class RateLimits extends Effect.Service<RateLimits>()("RateLimits", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const windowSeconds = yield* Config.integer("RATE_LIMIT_WINDOW_SECONDS").pipe(Config.withDefault(60))
    const agentLimit = yield* Config.integer("RATE_LIMIT_AGENT_PER_WINDOW").pipe(Config.withDefault(600))
    const clientLimit = yield* Config.integer("RATE_LIMIT_CLIENT_PER_WINDOW").pipe(Config.withDefault(120))
    const windowMs = windowSeconds * 1000

    const windowOf = (now: number) => new Date(Math.floor(now / windowMs) * windowMs)

    /** Counts one request against both windows (one statement) and says whether either is exceeded. */
    const consume = (agentId: string, client: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const start = windowOf(now)
        const rows = yield* sql<{ key: string; count: number }>`
          INSERT INTO rate_limit_windows (key, window_start, count)
          VALUES (${`agent:${agentId}`}, ${start}, 1), (${`client:${client}`}, ${start}, 1)
          ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
          RETURNING key, count`
        const count = (prefix: string) => rows.find((r) => r.key.startsWith(prefix))?.count ?? 0
        const agentCount = count("agent:")
        const clientCount = count("client:")
        return {
          agentRemaining: Math.max(0, agentLimit - agentCount),
          clientRemaining: Math.max(0, clientLimit - clientCount),
          resetSeconds: Math.max(1, Math.ceil((start.getTime() + windowMs - now) / 1000)),
          exceeded: agentCount > agentLimit || clientCount > clientLimit
        } satisfies Window
      }).pipe(Effect.orDie, Effect.withSpan("RateLimits.consume"))

    /** Gives the unit back (the request was refused before doing anything: bad payment, over quota). */
    const release = (agentId: string, client: string) =>
      Effect.gen(function* () {
        const start = windowOf(yield* Clock.currentTimeMillis)
        yield* sql`UPDATE rate_limit_windows SET count = count - 1
                   WHERE window_start = ${start} AND key IN (${`agent:${agentId}`}, ${`client:${client}`}) AND count > 0`
      }).pipe(Effect.orDie)

    const prune = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      yield* sql`DELETE FROM rate_limit_windows WHERE window_start < ${new Date(now - 2 * windowMs)}`
    })

    return { consume, release, prune, limits: { windowSeconds, agentLimit, clientLimit } } as const
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
