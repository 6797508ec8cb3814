// The primary of WEB_CONCURRENCY > 1: starts what the workers share once (embedded PostgreSQL with the migrations applied;
// the devnet's anvil with its contracts), then runs the workers with where to find them in their environment.
import { Config, Effect, Layer, Option, Redacted } from "effect"
import { devnetOperatorToken } from "../../layers/devnet/operatorToken.js"
import { Chain, ChainLive } from "../../layers/Chain.js"
import { checkAtStart } from "../../layers/chainIdentity.js"
import { AppConfig } from "../../layers/Config.js"
import { LoggingLive, LogSettings } from "../../layers/observability/Logging.js"
import { DatabaseInfo, PgLive } from "../../layers/Pg.js"
import { superviseWorkers } from "./supervisor.js"

/** What every worker must agree on: the database, the chain, and (devnet without OPERATOR_TOKEN) one operator token. */
const sharedEnvironment = (workers: number) => Effect.gen(function* () {
  const config = yield* AppConfig
  const db = yield* DatabaseInfo
  const chain = yield* Chain
  const pool = yield* Config.integer("DATABASE_POOL_SIZE").pipe(Config.withDefault(20))
  // Each worker has a pool of its own; the embedded server allows 200 connections (layers/embeddedPostgres.ts).
  if (db.mode === "embedded" && workers * pool > 190) {
    yield* Effect.logWarning(`${workers} workers × DATABASE_POOL_SIZE ${pool} = ${workers * pool} connections, more than the embedded PostgreSQL's 200 allow under load: lower DATABASE_POOL_SIZE`)
  }
  const token = Option.isNone(config.operatorToken) ? yield* Effect.promise(() => devnetOperatorToken(config.dataDir)) : undefined
  const lines = [
    `agent marketplace primary (pid ${process.pid}): starting workers`,
    `  database:        ${db.mode}${db.dataDir === undefined ? "" : ` (data in ${db.dataDir}), migrated`}`,
    `  chain RPC:       ${chain.rpcUrl} (${chain.mode})`,
    ...(token === undefined ? [] : [`  operator token:  ${token}`])
  ]
  const { format } = yield* LogSettings
  // JSON logs stay one object per line (and never carry the token).
  if (format === "json") yield* Effect.logInfo(lines[0] ?? "", { database: db.mode, chainRpcUrl: chain.rpcUrl, chainMode: chain.mode })
  else yield* Effect.sync(() => console.log(lines.join("\n")))
  return {
    DATABASE_URL: Redacted.value(db.url),
    ...(chain.mode === "devnet" ? { DEVNET_RPC_URL: chain.rpcUrl } : {}),
    ...(token === undefined ? {} : { OPERATOR_TOKEN: token })
  }
})

/** The primary: shared infrastructure, then `workers` server processes until a signal (or a crash loop). */
export const runPrimary = (workers: number) =>
  Effect.gen(function* () {
    // The primary network's chain identity once here (each worker checks every network again): a database of another
    // chain stops the start with one line instead of a worker crash loop.
    yield* checkAtStart([yield* Chain])
    const env = yield* sharedEnvironment(workers)
    return yield* superviseWorkers({ count: workers, env, maxRestarts: 5, windowMs: 60_000, stopGraceMs: 20_000 })
  }).pipe(
    Effect.scoped,
    // The workers' scope closes before the database and the chain stop (their finalizers run last).
    Effect.provide(Layer.merge(PgLive, ChainLive)),
    Effect.provide(LoggingLive)
  )
