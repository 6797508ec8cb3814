// Read cache for agents: per process, TTL-bounded, and never more than MAX_LAG_MS behind a committed change anywhere.
// Every committed change to an agent row notifies every process from its own transaction (a trigger, migrations/
// 0026_agent_cache_notify.sql), whoever made it (requests, the reputation fold worker, machines, probes, operators);
// the listener here drops the entry. The cache serves only while its listener is proven current: every BEAT_MS this
// process sends a heartbeat on the same channel, and its beat sent at S coming back means every change committed
// before S has been applied here (a connection receives notifications in commit order). A hit is served only when the
// latest beat back was sent at most MAX_LAG_MS ago; otherwise (a busy or lost listener) reads go to the database.
import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Option, Redacted, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import pg from "pg"
import { AppConfig } from "../../layers/Config.js"
import type { AgentRecord } from "../../src/domain/Agent.js"
import { makeEntries } from "./cacheEntries.js"

const CHANNEL = "agent_cache_invalidate"
const MAX_ENTRIES = 10_000
/** Heartbeat period, and the largest lag (age of the latest beat back) at which the cache still serves hits. */
export const BEAT_MS = 200
export const MAX_LAG_MS = 500
/** No beat back for this long: the listening connection is presumed lost and LISTEN starts again. */
const RELISTEN_AFTER_MS = 5_000

export class AgentCache extends Effect.Service<AgentCache>()("AgentCache", {
  scoped: Effect.gen(function* () {
    const sql = yield* PgClient.PgClient
    const url = Option.fromNullable(sql.config.url).pipe(Option.map(Redacted.value), Option.getOrElse(() => ""))
    const { agentCacheTtlMs } = yield* AppConfig
    const entries = makeEntries<AgentRecord>(MAX_ENTRIES)
    const beatPrefix = `beat:${randomUUID()}:`
    // Wall-clock send time of the latest own beat that came back on the current listening session (0: none yet).
    let beatSentAt = 0

    const current = () => Date.now() - beatSentAt <= MAX_LAG_MS

    const onPayload = (payload: string) => {
      if (!payload.startsWith("beat:")) return entries.drop(payload)
      if (payload.startsWith(beatPrefix)) beatSentAt = Math.max(beatSentAt, Number(payload.slice(beatPrefix.length)))
    }

    const beat = Effect.suspend(() => sql`SELECT pg_notify(${CHANNEL}, ${beatPrefix + String(Date.now())})`).pipe(Effect.ignore)

    /**
     * One listening session on a connection of its own (so that a broken one is replaced, whoever else listens): it
     * ends when no beat came back for RELISTEN_AFTER_MS, and the next one starts on a new connection.
     */
    const session = Effect.gen(function* () {
      beatSentAt = 0
      entries.clear() // notifications may have been missed before this listener connected
      yield* Effect.acquireRelease(
        Effect.tryPromise(async () => {
          // Named like the pool's connections, so the connection gauges and pg_stat_activity count it with them.
          const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000, application_name: "agent-marketplace" })
          client.on("error", () => {}) // a broken connection shows as beats that do not come back
          client.on("notification", (message) => {
            if (message.channel === CHANNEL && message.payload !== undefined) onPayload(message.payload)
          })
          try {
            await client.connect()
            await client.query(`LISTEN ${CHANNEL}`)
            return client
          } catch (error) {
            await client.end().catch(() => undefined)
            throw error
          }
        }),
        (client) => Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption(1_000))
      )
      const startedAt = Date.now()
      while (Date.now() - Math.max(beatSentAt, startedAt) <= RELISTEN_AFTER_MS) {
        yield* beat
        yield* Effect.sleep(BEAT_MS)
      }
      yield* Effect.logWarning(`agent cache: no heartbeat back for ${RELISTEN_AFTER_MS} ms; listening again on a new connection (reads go to the database meanwhile)`)
    }).pipe(Effect.scoped)

    yield* session.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("agent cache: cannot listen; reads go to the database", cause)),
      Effect.ensuring(Effect.sync(() => {
        beatSentAt = 0
        entries.clear()
      })),
      Effect.repeat(Schedule.spaced(Duration.seconds(1))),
      // Real time, also under a TestClock: the heartbeat measures the database's and this process's real delays.
      Effect.withClock(Clock.make()),
      Effect.forkScoped
    )

    /** A hit, only while the listener is current (see above). */
    const get = (id: string) =>
      Effect.map(Clock.currentTimeMillis, (now): AgentRecord | undefined => (current() ? entries.get(id, now) : undefined))

    /** The mark to take before reading an agent from the database, to `set` what was read. */
    const mark = Effect.sync(() => entries.mark())

    /** Keeps an agent read from the database under `since` (unless a change to it arrived since then). */
    const set = (id: string, value: AgentRecord, since: number) =>
      Effect.map(Clock.currentTimeMillis, (now) => void entries.offer(id, value, since, now + agentCacheTtlMs))

    /**
     * Drops the entry in this process at once (a read right after a change here sees it). Every process, this one
     * included, also drops it when the change's notification arrives, so no caller needs to broadcast anything; calling
     * this inside the changing transaction is fine too (a read in between reloads the old row, and the commit's
     * notification drops it again).
     */
    const invalidate = (id: string) => Effect.sync(() => entries.drop(id))

    return { get, mark, set, invalidate } as const
  })
}) {}
