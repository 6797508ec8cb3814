// Test harness: a fresh database per test file (cloned from the migrated template) and a real server on a free port, attached to the run's devnet.
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Context, Effect, Layer, Option, type Scope } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { inject } from "vitest"
import { Chain, type ChainShape, connectChain } from "../../layers/Chain.js"
import { ConfigLive } from "../../layers/Config.js"
import { DEV_PRIVATE_KEYS } from "../../layers/devnet/anvil.js"
import { freePort } from "../../layers/embeddedPostgres.js"
import { MoneyFaults, type MoneyFaultsShape } from "../../services/treasury/Faults.js"
import { makeAppLive } from "../../src/App.js"

export const OPERATOR_TOKEN = "test-operator-token-0123456789"

export interface TestEnvShape {
  readonly baseUrl: string
  readonly databaseUrl: string
  readonly chain: ChainShape
  readonly sql: SqlClient.SqlClient
}
export class TestEnv extends Context.Tag("test/TestEnv")<TestEnv, TestEnvShape>() {}

const adminQuery = async (text: string) => {
  const client = new pg.Client(inject("pgAdminUrl"))
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/** A new database cloned from the migrated template, dropped when the scope closes. */
export const freshDatabase = Effect.acquireRelease(
  Effect.promise(async () => {
    const name = `test_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
    await adminQuery(`CREATE DATABASE ${name} TEMPLATE ${inject("pgTemplate")}`)
    return { name, url: inject("pgAdminUrl").replace(/\/postgres$/, `/${name}`) }
  }),
  ({ name }) => Effect.promise(() => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
)

/** The run's devnet, with dev account 0 as treasury and settlement signer. */
export const AttachedDevnet = Layer.effect(
  Chain,
  connectChain({
    mode: "devnet",
    rpcUrl: inject("rpcUrl"),
    usdcAddress: inject("usdcAddress"),
    signerKey: Option.fromNullable(DEV_PRIVATE_KEYS[0]),
    treasuryAddress: Option.none()
  })
)

/** The whole service on a real HTTP port, with a fresh database; `settings` override environment variables, `faults` stand in for crashes and attackers. */
export const TestApp = (
  settings: Record<string, string> = {},
  options: {
    readonly faults?: Partial<MoneyFaultsShape>
    /** The URL the service connects to instead of the fresh database's (e.g. a counting proxy in front of it). */
    readonly databaseVia?: (url: string) => Effect.Effect<string, never, Scope.Scope>
    /** Another chain than the run's devnet with dev account 0 (e.g. a fresh treasury key, a facilitator settling). */
    readonly chain?: typeof AttachedDevnet
  } = {}
) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const databaseUrl = options.databaseVia === undefined ? db.url : yield* options.databaseVia(db.url)
      const port = yield* Effect.promise(freePort)
      const dataDir = yield* Effect.acquireRelease(
        Effect.promise(() => mkdtemp(join(tmpdir(), "marketplace-data-"))),
        (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
      )
      const provider = ConfigProvider.fromMap(
        new Map(Object.entries({
          DATABASE_URL: databaseUrl,
          PORT: String(port),
          HOST: "127.0.0.1",
          DATA_DIR: dataDir,
          OPERATOR_TOKEN,
          DATABASE_POOL_SIZE: "10",
          // One line per request would bury test output; a test about logs sets LOG_LEVEL itself.
          LOG_LEVEL: "warn",
          ...settings
        }))
      )
      const env = Layer.effect(
        TestEnv,
        Effect.gen(function* () {
          return {
            baseUrl: `http://127.0.0.1:${port}`,
            databaseUrl: db.url,
            chain: yield* Chain,
            sql: yield* SqlClient.SqlClient
          }
        })
      )
      return env.pipe(
        Layer.provideMerge(makeAppLive(options.chain ?? AttachedDevnet, { banner: false })),
        Layer.provide(ConfigLive),
        Layer.provide(Layer.succeed(MoneyFaults, { ...MoneyFaults.defaultValue(), ...options.faults })),
        Layer.provide(Layer.setConfigProvider(provider))
      )
    })
  )
