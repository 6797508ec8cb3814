// Instances started together on one empty database: everything a start does to the schema (the migrator's own table
// included) and the chain-identity record happen under one start-up lock, so every instance starts and the schema is
// migrated once. Four processes, each with its own connection pool, start on a new empty database at the same moment,
// ten times.
import { type ChildProcess, spawn } from "node:child_process"
import { readdirSync } from "node:fs"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"

const root = fileURLToPath(new URL("../..", import.meta.url))
const INSTANCES = 4
const ROUNDS = 10

interface Instance {
  readonly child: ChildProcess
  /** The next `RESULT` line the instance writes. */
  readonly next: () => Promise<string>
}

const spawnInstance = (): Instance => {
  const child = spawn(process.execPath, ["--import", "tsx", "test/support/startupInstance.ts", inject("rpcUrl"), inject("usdcAddress")], {
    cwd: root,
    stdio: ["pipe", "pipe", "inherit"]
  })
  const waiting: Array<(line: string) => void> = []
  const ready: Array<string> = []
  readline.createInterface({ input: child.stdout! }).on("line", (line) => {
    if (!line.startsWith("RESULT ")) return
    const result = line.slice("RESULT ".length)
    const resolve = waiting.shift()
    if (resolve === undefined) ready.push(result)
    else resolve(result)
  })
  child.once("exit", (code) => {
    for (const resolve of waiting.splice(0)) resolve(`fail the instance exited (${code})`)
  })
  return {
    child,
    next: () => {
      const line = ready.shift()
      return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => waiting.push(resolve))
    }
  }
}

const admin = async <R extends pg.QueryResultRow>(database: string, text: string): Promise<Array<R>> => {
  const client = new pg.Client(inject("pgAdminUrl").replace(/\/postgres$/, `/${database}`))
  await client.connect()
  try {
    return (await client.query<R>(text)).rows
  } finally {
    await client.end()
  }
}

const migrationFiles = readdirSync(new URL("../../migrations/", import.meta.url)).filter((f) => /^\d+_.+\.sql$/.test(f)).length

describe("instances starting together on one empty database", () => {
  const instances: Array<Instance> = []
  const databases: Array<string> = []
  beforeAll(async () => {
    for (let i = 0; i < INSTANCES; i++) instances.push(spawnInstance())
    expect(await Promise.all(instances.map((instance) => instance.next()))).toEqual(Array(INSTANCES).fill("ready"))
  }, 60_000)
  afterAll(async () => {
    for (const instance of instances) instance.child.kill("SIGKILL")
    for (const name of databases) await admin("postgres", `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  })

  it(`all ${INSTANCES} start, ${ROUNDS} times; the schema is migrated once and one chain identity is recorded`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const name = `startup_race_${Date.now().toString(36)}_${round}`
      databases.push(name)
      // Empty: no template with the schema, as a new deployment's database is.
      await admin("postgres", `CREATE DATABASE ${name} TEMPLATE template0`)
      const url = inject("pgAdminUrl").replace(/\/postgres$/, `/${name}`)
      const answers = instances.map((instance) => instance.next())
      for (const instance of instances) instance.child.stdin!.write(`${url}\n`)
      expect({ round, results: await Promise.all(answers) }).toEqual({ round, results: Array(INSTANCES).fill("ok") })
      const migrations = await admin<{ n: string }>(name, "SELECT count(*) AS n FROM effect_sql_migrations")
      expect(Number(migrations[0]?.n)).toBe(migrationFiles)
      const identities = await admin<{ network: string }>(name, "SELECT network FROM chain_identities")
      expect(identities).toHaveLength(1)
    }
  }, 120_000)
})
