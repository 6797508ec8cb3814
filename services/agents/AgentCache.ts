// Read cache for agents: per process, TTL-bounded, invalidated locally at once and across processes by LISTEN/NOTIFY.
import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Schedule, Stream } from "effect"
import { AppConfig } from "../../layers/Config.js"
import type { AgentRecord } from "../../src/domain/Agent.js"

const CHANNEL = "agent_cache_invalidate"
const MAX_ENTRIES = 10_000

export class AgentCache extends Effect.Service<AgentCache>()("AgentCache", {
  scoped: Effect.gen(function* () {
    const pg = yield* PgClient.PgClient
    const { agentCacheTtlMs } = yield* AppConfig
    const entries = new Map<string, { readonly value: AgentRecord; readonly expiresAt: number }>()

    const drop = (id: string) => void entries.delete(id)

    // Other processes' changes: a notification per changed agent id.
    yield* pg.listen(CHANNEL).pipe(
      Stream.runForEach((id) => Effect.sync(() => drop(id))),
      Effect.tapErrorCause(() => Effect.sync(() => entries.clear())),
      Effect.retry(Schedule.spaced(Duration.seconds(1))),
      Effect.forkScoped
    )

    const get = (id: string) =>
      Effect.map(Clock.currentTimeMillis, (now): AgentRecord | undefined => {
        const hit = entries.get(id)
        if (hit === undefined) return undefined
        if (hit.expiresAt <= now) {
          entries.delete(id)
          return undefined
        }
        return hit.value
      })

    const set = (id: string, value: AgentRecord) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (entries.size >= MAX_ENTRIES) {
          const oldest = entries.keys().next()
          if (!oldest.done) entries.delete(oldest.value)
        }
        entries.set(id, { value, expiresAt: now + agentCacheTtlMs })
      })

    /** Drops the entry here and tells every other process to drop it. Call after the change committed. */
    const invalidate = (id: string) =>
      Effect.sync(() => drop(id)).pipe(
        // PgClient.notify sends `NOTIFY ch, $1`, which PostgreSQL rejects; pg_notify takes parameters.
        Effect.zipRight(pg`SELECT pg_notify(${CHANNEL}, ${id})`),
        Effect.catchAll((error) => Effect.logWarning(`cache invalidation broadcast failed for ${id}; TTL bounds staleness`, error))
      )

    /** Local drop only (frequent counters like health and reputation; other processes converge within the TTL). */
    const invalidateLocal = (id: string) => Effect.sync(() => drop(id))

    /**
     * Applies a change that was just committed to the cached copy, if any (execution outcomes move reputation and
     * health on every call: dropping the entry each time would make the hot path reload the agent every time).
     */
    const patch = (id: string, change: (agent: AgentRecord) => AgentRecord) =>
      Effect.sync(() => {
        const hit = entries.get(id)
        if (hit !== undefined) entries.set(id, { value: change(hit.value), expiresAt: hit.expiresAt })
      })

    return { get, set, invalidate, invalidateLocal, patch } as const
  })
}) {}
