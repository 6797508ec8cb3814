// One embedded PostgreSQL (with a migrated template database) and one anvil devnet for the whole test run.
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, Redacted, String as Str } from "effect"
import { chmod, mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import type { TestProject } from "vitest/node"
import { startDevnet } from "../../layers/devnet/anvil.js"
import { startEmbeddedPostgres } from "../../layers/embeddedPostgres.js"
import { sqlFileLoader } from "../../layers/Pg.js"

export const TEMPLATE_DB = "marketplace_template"

declare module "vitest" {
  export interface ProvidedContext {
    readonly pgAdminUrl: string
    readonly pgTemplate: string
    readonly rpcUrl: string
    readonly usdcAddress: `0x${string}`
  }
}

/** Vitest reports a failing global setup with no reason at all: say why, then fail the run. */
/** PostgreSQL's own account of a deadlock (both statements), which the client's error leaves out: on the run's stderr. */
const reportDeadlocks = (line: string) => {
  if (line.includes("deadlock detected")) process.stderr.write(`postgres: ${line}\n`)
}

export default async function setup(project: TestProject) {
  try {
    return await start(project)
  } catch (error) {
    console.error(`\ntest setup failed: ${error instanceof Error ? error.message : String(error)}\n`)
    throw error
  }
}

async function start(project: TestProject) {
  const dir = await mkdtemp(join(tmpdir(), "marketplace-test-"))
  await chmod(dir, 0o755) // the postgres system user must traverse it
  const [postgres, devnet] = await Promise.all([
    startEmbeddedPostgres({ databaseDir: join(dir, "pg"), persistent: false, unsafeFast: true, database: TEMPLATE_DB, onLog: reportDeadlocks }),
    startDevnet({ port: 0, compileCacheDir: join(process.cwd(), "node_modules", ".cache", "test-usdc") })
  ])
  // Migrate the template once with the production migrator; every test file clones it.
  await Effect.runPromise(
    PgMigrator.run({ loader: sqlFileLoader }).pipe(
      Effect.provide(
        Layer.merge(
          PgClient.layer({ url: Redacted.make(postgres.url), transformQueryNames: Str.camelToSnake, transformResultNames: Str.snakeToCamel }),
          NodeContext.layer
        )
      ),
      Effect.scoped
    )
  )
  const admin = new pg.Client(postgres.url.replace(/\/[^/]+$/, "/postgres"))
  await admin.connect()
  await admin.query(`ALTER DATABASE ${TEMPLATE_DB} WITH IS_TEMPLATE true`)
  await admin.end()
  project.provide("pgAdminUrl", postgres.url.replace(/\/[^/]+$/, "/postgres"))
  project.provide("pgTemplate", TEMPLATE_DB)
  project.provide("rpcUrl", devnet.rpcUrl)
  project.provide("usdcAddress", devnet.usdcAddress)
  return async () => {
    await Promise.all([devnet.stop(), postgres.stop()])
    await rm(dir, { recursive: true, force: true })
  }
}
