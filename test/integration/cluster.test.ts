// WEB_CONCURRENCY=2 with real processes (the start script): two workers serve paid executions on one port, each payment
// settled once and the ledger equal to the chain; a worker killed with SIGKILL is replaced while the other serves; SIGTERM
// to the primary stops the workers, the embedded PostgreSQL and anvil it started, leaving no process behind; workers that
// crash-loop make the primary give up with exit code 1.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { chmod, mkdtemp, readdir, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseAbiItem } from "viem"
import { beforeAll, inject } from "vitest"
import { freePort } from "../../layers/embeddedPostgres.js"
import { fakeAgent } from "../support/agents.js"
import { authorizationUsed, call, devAccount, paidCall, publicClient, TREASURY, usdcBalance } from "../support/clients.js"
import { freshDatabase } from "../support/harness.js"
import { PROCESS_OPERATOR_TOKEN, registerAgentAt, sharedSettings } from "../support/processes.js"
import { ensureBundle, type ServerProcess, serverProcess } from "../support/servers.js"

const OPERATOR_TOKEN = PROCESS_OPERATOR_TOKEN
const PRICE = 11_000n // the echo capability's 0.01 + the platform's 0.001 (premium tier: released at once)

beforeAll(ensureBundle, 180_000)

const tempDir = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = await mkdtemp(join(tmpdir(), "marketplace-cluster-"))
    await chmod(dir, 0o755) // the postgres system user must reach the cluster inside
    return dir
  }),
  (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
)

const sleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

/** Polls in real time (the processes run on their own clocks) until `done`, for up to `ms`. */
const until = <A>(effect: Effect.Effect<A>, done: (a: A) => boolean, ms: number, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    for (;;) {
      const value = yield* effect
      if (done(value)) return value
      if (Date.now() > deadline) return yield* Effect.dieMessage(`${what}: not within ${ms} ms (last: ${JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v))})`)
      yield* sleep(100)
    }
  })

/** The primary's line once every worker listens: the worker pids. */
const workerPids = (server: ServerProcess) =>
  until(Effect.sync(() => /server workers listening on \S+ \(primary pid \d+, worker pids ([\d, ]+)\)/.exec(server.output())?.[1]), (m) => m !== undefined, 60_000, "both workers listening")
    .pipe(Effect.map((m) => (m ?? "").split(", ").map(Number)))

/** JSON log lines of the workers: which pid answered which request id with which status. */
const served = (server: ServerProcess) =>
  server.output().split("\n").flatMap((line) => {
    if (!line.startsWith("{")) return []
    try {
      const record = JSON.parse(line) as { route?: string; status?: number; pid?: number; requestId?: string }
      return record.route === "/api/v1/execute" && record.status === 200 && record.pid !== undefined && record.requestId !== undefined
        ? [{ pid: record.pid, requestId: record.requestId }]
        : []
    } catch {
      return []
    }
  })

/** `count` paid executions at once (each its own connection, so the primary hands them to both workers); their statuses. */
const executeMany = (server: ServerProcess, agentId: string, label: string, count: number) =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => i),
    (i) =>
      Effect.promise(() =>
        paidCall(devAccount(2 + (i % 4)), `${server.baseUrl}/api/v1/execute`, {
          json: { targetAgentId: agentId, capabilityId: "echo", input: { text: `${label} ${i}` } },
          headers: { "x-request-id": `${label}-${i}` }
        }).then((r) => r.status, (error: unknown) => `failed: ${String(error)}`)),
    { concurrency: count }
  )

const transferEvent = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)")

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** `pid` and its live descendants (from /proc), with their command names. */
const processTree = async (pid: number) => {
  const parents = new Map<number, Array<{ pid: number; comm: string }>>()
  for (const entry of (await readdir("/proc")).filter((e) => /^\d+$/.test(e))) {
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => undefined)
    if (stat === undefined) continue
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
    parents.set(ppid, [...(parents.get(ppid) ?? []), { pid: Number(entry), comm }])
  }
  const out: Array<{ pid: number; comm: string }> = []
  const walk = (p: number) => {
    for (const child of parents.get(p) ?? []) {
      out.push(child)
      walk(child.pid)
    }
  }
  walk(pid)
  return out
}

describe("WEB_CONCURRENCY=2: several server processes on one port", () => {
  it.scopedLive("two workers serve paid executions, each payment once and the ledger equal to the chain; a worker killed with SIGKILL is replaced while the other serves", () =>
    Effect.gen(function* () {
      const { env, query } = yield* sharedSettings({ WEB_CONCURRENCY: "2", LOG_FORMAT: "json" })
      const startBlock = yield* Effect.promise(() => publicClient().getBlockNumber())
      const server = yield* serverProcess(env)
      const pids = yield* workerPids(server)
      expect(pids).toHaveLength(2)
      const agentId = yield* registerAgentAt(server, devAccount(1), (yield* fakeAgent("echo")).url)

      // Both workers answer paid executions (batches at once until each has served one; the first batch usually does).
      let statuses: Array<number | string> = []
      for (let round = 0; round < 4 && new Set(served(server).map((s) => s.pid)).size < 2; round++) {
        statuses = [...statuses, ...(yield* executeMany(server, agentId, `both-${round}`, 6))]
      }
      expect(statuses.every((s) => s === 200)).toBe(true)
      expect(new Set(served(server).map((s) => s.pid))).toEqual(new Set(pids))

      // SIGKILL one worker: the other serves at once, the primary starts a replacement that serves too.
      const [victim, survivor] = pids as [number, number]
      process.kill(victim, "SIGKILL")
      yield* until(Effect.sync(() => server.output().includes(`server worker pid ${victim} ended (signal SIGKILL)`)), (seen) => seen, 10_000, "the primary notices the exit")
      const meanwhile = yield* executeMany(server, agentId, "meanwhile", 4)
      expect(meanwhile).toEqual([200, 200, 200, 200])
      const replacement = Number(
        (yield* until(Effect.sync(() => new RegExp(`server worker pid (\\d+) \\(replacing pid ${victim}\\) listening`).exec(server.output())?.[1]), (m) => m !== undefined, 60_000, "the replacement listens"))
      )
      expect(alive(replacement)).toBe(true)
      // More at once than the client keeps idle connections (all to the survivor by now): new ones reach the replacement too.
      let after: Array<number | string> = []
      for (let round = 0; round < 4 && !served(server).some((s) => s.pid === replacement); round++) {
        after = [...after, ...(yield* executeMany(server, agentId, `after-${round}`, 12))]
      }
      expect(after.every((s) => s === 200)).toBe(true)
      const servers = new Set(served(server).map((s) => s.pid))
      expect(servers.has(replacement) && servers.has(survivor)).toBe(true)
      const executions = statuses.length + meanwhile.length + after.length

      // Each payment once: one row per execution, every one settled, each authorization used on chain, one transfer each.
      const payments = yield* until(
        query<{ nonce: string; payer: string; status: string }>("SELECT nonce, payer, status FROM payments WHERE purpose = 'execution'"),
        (rows) => rows.length === executions && rows.every((r) => r.status === "settled"),
        60_000,
        "every execution's payment settled"
      )
      expect(new Set(payments.map((p) => p.nonce)).size).toBe(executions)
      for (const p of payments) expect(yield* Effect.promise(() => authorizationUsed(p.payer as `0x${string}`, p.nonce as `0x${string}`))).toBe(true)
      const transfers = yield* Effect.promise(() =>
        publicClient().getLogs({ event: transferEvent, args: { to: TREASURY }, fromBlock: startBlock + 1n, toBlock: "latest" }))
      expect(transfers.filter((t) => t.args.value === PRICE)).toHaveLength(executions)

      // The ledger's treasury equals the treasury's USDC on chain, to the micro-USDC.
      const books = Effect.all([
        query<{ total: string }>("SELECT COALESCE(SUM(amount), 0)::text AS total FROM ledger_entries WHERE account_id = 'treasury'").pipe(Effect.map((r) => BigInt(r[0]?.total ?? "0"))),
        Effect.promise(() => usdcBalance(TREASURY))
      ])
      const [ledger, chain] = yield* until(books, ([l, c]) => l === c, 30_000, "the ledger's treasury equals the chain's")
      expect(ledger).toBe(chain)
    }), { timeout: 240_000 })

  it.scopedLive("SIGTERM to the primary stops the workers, then the embedded PostgreSQL and anvil it started: no process left", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const server = yield* serverProcess({ WEB_CONCURRENCY: "2", DATA_DIR: dataDir, DEVNET_PORT: String(yield* Effect.promise(freePort)) })
      const pids = yield* workerPids(server)
      const primary = server.child.pid ?? 0
      const tree = yield* Effect.promise(() => processTree(primary))
      const names = tree.map((p) => p.comm)
      // One database and one chain for both workers: started once, by the primary.
      expect(names.filter((n) => n === "anvil")).toHaveLength(1)
      expect(names).toContain("postgres")
      expect(pids.every((pid) => tree.some((p) => p.pid === pid))).toBe(true)
      expect((yield* Effect.promise(() => call(`${server.baseUrl}/health`))).status).toBe(200)

      server.child.kill("SIGTERM")
      const exit = yield* Effect.promise(() => server.exited)
      expect(exit).toEqual({ code: 0, signal: null })
      const left = yield* until(Effect.sync(() => tree.filter((p) => alive(p.pid))), (l) => l.length === 0, 5_000, "every process gone")
      expect(left).toEqual([])
    }), { timeout: 180_000 })

  it.scopedLive("workers that cannot start are replaced five times, then the primary gives up: it says why, exits with code 1, no worker left", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const dataDir = yield* tempDir
      // A setting only the workers read (the HTTP server's), so each one fails at start after the primary is up.
      const child = spawn(process.execPath, ["src/tools/start.mjs"], {
        cwd: fileURLToPath(new URL("../..", import.meta.url)),
        env: {
          PATH: process.env["PATH"] ?? "",
          HOME: process.env["HOME"] ?? "/tmp",
          WEB_CONCURRENCY: "2",
          HTTP_REQUEST_TIMEOUT_MS: "5",
          PORT: String(yield* Effect.promise(freePort)),
          HOST: "127.0.0.1",
          DATABASE_URL: db.url,
          DEVNET_RPC_URL: inject("rpcUrl"),
          DATA_DIR: dataDir,
          OPERATOR_TOKEN
        },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (c: Buffer) => (output += c.toString("utf8")))
      child.stderr.on("data", (c: Buffer) => (output += c.toString("utf8")))
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
      yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL")))
      const exit = yield* Effect.promise(() => Promise.race([exited, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 90_000))]))
      expect(exit).toEqual({ code: 1, signal: null })
      expect(output.match(/ended \(exit code 1\); starting a replacement/g)).toHaveLength(5)
      expect(output).toMatch(/server workers are crash-looping \(6 exits within 60 s, the last: pid \d+, exit code 1\); giving up/)
      expect(output).toContain("HTTP_REQUEST_TIMEOUT_MS must be between 1000 and 300000")
      const left = yield* Effect.promise(() => processTree(child.pid ?? 0))
      expect(left).toEqual([])
    }), { timeout: 120_000 })
})
