// One start-up at a time per database: everything a start does to the schema (the migrator's own bookkeeping table
// included) and the chain-identity check run under one PostgreSQL advisory lock, held by a connection of its own.
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Redacted } from "effect"
import pg from "pg"

/** The advisory lock's key: the same number in every instance of the service on one database. */
export const STARTUP_LOCK_KEY = 7_204_418_262_913_001n

/**
 * Runs `effect` while holding the start-up lock. The lock is taken on a dedicated connection (not the pool's: the
 * work inside uses the pool, and a pool of one must not wait on itself) and released, with the connection, after the
 * effect ends however it ends. A process that dies while holding it loses the connection and so the lock.
 */
export const withStartupLock = (url: Redacted.Redacted<string>, connectTimeoutMs = 5_000) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.acquireUseRelease(
      Effect.tryPromise({
        try: async () => {
          const client = new pg.Client({
            connectionString: Redacted.value(url),
            connectionTimeoutMillis: connectTimeoutMs,
            application_name: "agent-marketplace start-up"
          })
          client.on("error", () => {})
          try {
            await client.connect()
            const tried = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS locked", [STARTUP_LOCK_KEY.toString()])
            return { client, waited: tried.rows[0]?.locked !== true }
          } catch (error) {
            await client.end().catch(() => undefined)
            throw error
          }
        },
        catch: (cause) => new SqlError({ message: "the start-up lock could not be taken", cause })
      }).pipe(
        Effect.tap(({ client, waited }) =>
          waited
            ? Effect.logInfo("another instance is starting on this database: waiting for its start-up to finish").pipe(
              Effect.zipRight(Effect.tryPromise({
                try: () => client.query("SELECT pg_advisory_lock($1::bigint)", [STARTUP_LOCK_KEY.toString()]),
                catch: (cause) => new SqlError({ message: "waiting for the start-up lock failed", cause })
              })),
              Effect.tapError(() => Effect.promise(() => client.end().catch(() => undefined)))
            )
            : Effect.void)
      ),
      () => effect,
      ({ client }) =>
        Effect.promise(() =>
          client.query("SELECT pg_advisory_unlock($1::bigint)", [STARTUP_LOCK_KEY.toString()]).catch(() => undefined)
            .then(() => client.end()).catch(() => undefined))
    )
