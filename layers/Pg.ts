// PostgreSQL: an embedded server under DATA_DIR when DATABASE_URL is unset, any server when it is set; migrations run at start.
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Config, Data, Duration, Effect, Layer, Option, Redacted, String as Str } from "effect"
import cluster from "node:cluster"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { AppConfig } from "./Config.js"
import { startEmbeddedPostgres } from "./embeddedPostgres.js"
import { PreparingClient } from "./pgPrepared.js"
import { withStartupLock } from "./startupLock.js"
import pg from "pg"

export class DatabaseStartError extends Data.TaggedError("DatabaseStartError")<{ readonly message: string }> {}

/** Where the database is, for the start-up banner. */
export class DatabaseInfo extends Effect.Service<DatabaseInfo>()("Pg/DatabaseInfo", {
  succeed: { mode: "external" as "embedded" | "external", url: Redacted.make(""), dataDir: undefined as string | undefined }
}) {}

const migrationsDir = fileURLToPath(new URL("../migrations/", import.meta.url))

/** Plain `.sql` files `NNNN_name.sql`, each run as one multi-statement script inside the migrator's transaction. */
export const sqlFileLoader = Effect.sync(() =>
  fs
    .readdirSync(migrationsDir)
    .flatMap((file) => {
      const match = /^(\d+)_(.+)\.sql$/.exec(file)
      if (match === null) return []
      const text = fs.readFileSync(path.join(migrationsDir, file), "utf8")
      const run = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text).raw)
      return [[Number(match[1]), match[2] ?? file, Effect.succeed(run)] as const]
    })
    .sort((a, b) => a[0] - b[0])
)

/**
 * Every pending migration, the migrator's own `effect_sql_migrations` table included (the migrator creates it before
 * its table lock), under the start-up lock: instances starting together on one database migrate it once, in turn.
 */
export const migrateUnderLock = (url: Redacted.Redacted<string>) =>
  PgMigrator.run({ loader: sqlFileLoader }).pipe(withStartupLock(url))

const clientOptions = {
  transformQueryNames: Str.camelToSnake,
  transformResultNames: Str.snakeToCamel,
  // With the default `true` the name transforms would also rewrite keys inside jsonb values.
  transformJson: false,
  applicationName: "agent-marketplace"
} as const

/** The exit code of a server whose embedded PostgreSQL died (any non-zero code makes the supervisor restart it). */
export const EMBEDDED_POSTGRES_DIED_EXIT = 75

const embedded = Effect.gen(function* () {
  const config = yield* AppConfig
  const server = yield* Effect.acquireRelease(
    Effect.tryPromise({
      try: () => startEmbeddedPostgres({ databaseDir: path.join(config.dataDir, "postgres"), persistent: true }),
      catch: (error) => new DatabaseStartError({ message: `embedded PostgreSQL failed to start: ${String(error)}` })
    }),
    (server) => Effect.promise(() => server.stop())
  )
  // Our own PostgreSQL died under us (killed, crashed): every request would answer 503 until someone noticed. Exit
  // non-zero instead, so the supervisor (`npm start`) or the process manager stops the group and starts the service
  // again, which starts PostgreSQL on the same data (crash recovery from its WAL, a stale postmaster.pid cleared).
  // Ctrl-C in a terminal reaches PostgreSQL too (same process group): a death that follows a stop signal is a stop.
  let signalled = false
  const onSignal = () => void (signalled = true)
  yield* Effect.acquireRelease(
    Effect.sync(() => ["SIGINT", "SIGTERM"].forEach((s) => process.once(s, onSignal))),
    () => Effect.sync(() => ["SIGINT", "SIGTERM"].forEach((s) => process.off(s, onSignal)))
  )
  yield* Effect.promise(() => server.died).pipe(
    Effect.delay(Duration.millis(500)),
    Effect.flatMap((how) =>
      signalled ? Effect.void : Effect.sync(() => {
        console.error(`agent marketplace (pid ${process.pid}): the embedded PostgreSQL died (${how}); exiting with code ${EMBEDDED_POSTGRES_DIED_EXIT} to be restarted with it`)
        // WEB_CONCURRENCY > 1: the workers would spend the supervisor's grace on a shutdown against a dead database.
        for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGKILL")
        process.exit(EMBEDDED_POSTGRES_DIED_EXIT)
      })),
    Effect.forkScoped
  )
  return { url: Redacted.make(server.url), dataDir: server.databaseDir }
})

const maxConnections = Config.integer("DATABASE_POOL_SIZE").pipe(Config.withDefault(20))
/** Longest a statement may run (the server cancels it) and longest we wait for an answer (the socket is dropped). */
const queryTimeoutMs = Config.integer("DATABASE_QUERY_TIMEOUT_MS").pipe(Config.withDefault(10_000))
/** Longest we wait to open a connection or to get one from the pool. */
const connectTimeoutMs = Config.integer("DATABASE_CONNECT_TIMEOUT_MS").pipe(Config.withDefault(5_000))

/**
 * A socket that gives up on a server that stopped answering: armed when a request is written, disarmed when anything
 * comes back. An idle connection (or one waiting on LISTEN) is never timed out; a query with no answer within
 * `timeoutMs` fails, and the pool replaces the connection. (A paused or partitioned server never cancels the
 * statement itself, so `statement_timeout` alone would not do.)
 */
export const answeringSocket = (timeoutMs: number) => (): net.Socket => {
  const socket = new net.Socket()
  let timer: NodeJS.Timeout | undefined
  const disarm = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
  }
  const write: typeof socket.write = socket.write.bind(socket)
  socket.write = ((...args: Parameters<typeof socket.write>) => {
    timer ??= setTimeout(() => socket.destroy(new Error(`PostgreSQL did not answer within ${timeoutMs} ms`)), timeoutMs)
    return write(...args)
  }) as typeof socket.write
  socket.on("data", disarm)
  socket.on("close", disarm)
  return socket
}

/** `statement_timeout` for every connection, through libpq's `options` parameter of the URL. */
const withStatementTimeout = (url: Redacted.Redacted<string>, timeoutMs: number) => {
  const text = Redacted.value(url)
  const separator = text.includes("?") ? "&" : "?"
  return Redacted.make(`${text}${separator}options=${encodeURIComponent(`-c statement_timeout=${timeoutMs}`)}`)
}

/** SqlClient + PgClient for the configured database, with every pending migration applied. */
export const PgLive = Layer.unwrapScoped(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const mode = Option.isSome(config.databaseUrl) ? ("external" as const) : ("embedded" as const)
    const { url, dataDir } = Option.isSome(config.databaseUrl) ? { url: config.databaseUrl.value, dataDir: undefined } : yield* embedded
    const pool = yield* maxConnections
    const timeoutMs = yield* queryTimeoutMs
    const connectMs = yield* connectTimeoutMs
    const prepared = yield* Config.boolean("DATABASE_PREPARED_STATEMENTS").pipe(Config.withDefault(true))
    // PgClient.layer's own pool, built here so that its connections can name repeated statements (pgPrepared.ts).
    const client = PgClient.layerFromPool({
      ...clientOptions,
      acquire: Effect.gen(function* () {
        const pgPool = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const created = new pg.Pool({
              connectionString: Redacted.value(withStatementTimeout(url, timeoutMs)),
              max: pool,
              connectionTimeoutMillis: connectMs,
              application_name: clientOptions.applicationName,
              stream: answeringSocket(timeoutMs + 2_000),
              ...(prepared ? { Client: PreparingClient } : {})
            })
            created.on("error", () => {})
            return created
          }),
          (created) => Effect.promise(() => created.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
        )
        yield* Effect.tryPromise({
          try: () => pgPool.query("SELECT 1"),
          catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
        }).pipe(
          Effect.timeoutFail({
            duration: Duration.millis(connectMs),
            onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
          })
        )
        return pgPool
      })
    })
    const migrated = Layer.effectDiscard(migrateUnderLock(url)).pipe(Layer.provide(NodeContext.layer))
    return Layer.merge(
      Layer.provideMerge(migrated, client),
      Layer.succeed(DatabaseInfo, DatabaseInfo.make({ mode, url, dataDir }))
    )
  })
)
