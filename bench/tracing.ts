// Tracing's cost (`npx tsx bench/tracing.ts`): the service as a child process answering paid-free GETs with tracing off
// (OTEL_EXPORTER_OTLP_ENDPOINT unset, the default), with tracing on (exporting OTLP/protobuf to a sink in this process),
// and with tracing off and the request log at warn (what one log line per request costs). Reports req/s and the
// service's CPU per request; writes its section of docs/performance.md between the `bench:tracing` markers.
//
// Real parts only: one anvil and one embedded PostgreSQL started here, the service (`node --import tsx src/main.ts`,
// background workers on), the closed-loop load generator (undici) and the OTLP sink in this process. Modes alternate
// round by round so a change in the machine's load hits each of them alike; the table gives the median round.
//
// Settings (environment): BENCH_REQUESTS (4000 per route and round), BENCH_WARMUP (500), BENCH_ROUNDS (3),
// BENCH_CONCURRENCY (16), BENCH_OUTPUT (docs/performance.md; "-" prints only).
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { chmod, mkdtemp, rm } from "node:fs/promises"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { startDevnet } from "../layers/devnet/anvil.js"
import { freePort, startEmbeddedPostgres } from "../layers/embeddedPostgres.js"
import { baseEnv, cleanupAll, installSignalHandlers, onCleanup, spawnChild } from "./lib/children.js"
import { percentile, runClosedLoop } from "./lib/load.js"
import { cpuMs } from "./lib/proc.js"
import { writeSection } from "./lib/sections.js"

const intEnv = (name: string, fallback: number) => {
  const n = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer`)
  return n
}
const PARAMS = {
  requests: intEnv("BENCH_REQUESTS", 4_000),
  warmup: intEnv("BENCH_WARMUP", 500),
  rounds: intEnv("BENCH_ROUNDS", 3),
  concurrency: intEnv("BENCH_CONCURRENCY", 16),
  output: process.env["BENCH_OUTPUT"] ?? path.join(process.cwd(), "docs", "performance.md")
}

const MODES = [
  { name: "tracing off (default)", env: {} },
  { name: "tracing on (OTLP/protobuf to a local sink)", env: { OTEL_EXPORTER_OTLP_ENDPOINT: "SINK" } },
  { name: "tracing off, request log at warn", env: { LOG_LEVEL: "warn" } }
] as const

/** No database (a static key) and one discovery read (SQL each time: the spans of a statement are part of the cost). */
const ROUTES = [
  { name: "GET /api/v1/platform/signing-key", path: "/api/v1/platform/signing-key" },
  { name: "GET /api/v1/discover?limit=10", path: "/api/v1/discover?limit=10" }
] as const

const log = (line: string) => console.log(line)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(", ")

/** An OTLP/HTTP collector that keeps nothing: counts export requests and bytes. */
const startSink = () =>
  new Promise<{ readonly url: string; readonly stats: { posts: number; bytes: number }; readonly close: () => void }>((resolve) => {
    const stats = { posts: 0, bytes: 0 }
    const server = http.createServer((req, res) => {
      req.on("data", (c: Buffer) => (stats.bytes += c.length))
      req.on("end", () => {
        stats.posts++
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end()
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stats, close: () => server.close() }))
  })

const waitHealthy = async (origin: string, alive: () => boolean, output: () => string) => {
  const deadline = Date.now() + 120_000
  for (;;) {
    if (!alive()) throw new Error(`the service exited during start-up:\n${output()}`)
    const ok = await fetch(`${origin}/health`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.arrayBuffer().then(() => r.status === 200), () => false)
    if (ok) return
    if (Date.now() > deadline) throw new Error(`the service did not become healthy:\n${output()}`)
    await sleep(100)
  }
}

interface Sample {
  readonly mode: string
  readonly route: string
  readonly rps: number
  readonly cpuMsPerRequest: number
  readonly p50: number
  readonly p99: number
  readonly exportedBytesPerRequest: number
}

const main = async () => {
  installSignalHandlers()
  const startedAt = new Date()
  const tmp = await mkdtemp(path.join(os.tmpdir(), "marketplace-bench-tracing-"))
  await chmod(tmp, 0o755)
  onCleanup("temp dir", () => rm(tmp, { recursive: true, force: true }))
  log("starting anvil, PostgreSQL and the OTLP sink…")
  const devnet = await startDevnet({ port: 0, compileCacheDir: "node_modules/.cache/test-usdc" })
  onCleanup("anvil", () => devnet.stop())
  const pg = await startEmbeddedPostgres({ databaseDir: path.join(tmp, "pg"), persistent: false, database: "marketplace" })
  onCleanup("postgres", () => Promise.race([pg.stop(), sleep(10_000)]).then(() => undefined))
  const sink = await startSink()
  onCleanup("sink", async () => sink.close())
  const loadBefore = loadAverage()

  const samples: Array<Sample> = []
  for (let round = 1; round <= PARAMS.rounds; round++) {
    for (const mode of MODES) {
      const port = await freePort()
      const env = Object.fromEntries(Object.entries(mode.env).map(([k, v]) => [k, v === "SINK" ? sink.url : v]))
      const service = spawnChild("service", process.execPath, ["--import", "tsx", "src/main.ts"], {
        env: {
          ...baseEnv(),
          DEVNET_RPC_URL: devnet.rpcUrl,
          DATABASE_URL: pg.url,
          DATA_DIR: path.join(tmp, "service-data"),
          HOST: "127.0.0.1",
          PORT: String(port),
          OPERATOR_TOKEN: "bench-operator-token-123456",
          HEALTH_PROBE_INTERVAL_MS: "3600000",
          ...env
        }
      })
      const origin = `http://127.0.0.1:${port}`
      await waitHealthy(origin, service.alive, service.output)
      for (const route of ROUTES) {
        const jobs = (n: number) => Array.from({ length: n }, () => ({ headers: {}, path: route.path }))
        const run = (n: number) => runClosedLoop({ origin, path: route.path, jobs: jobs(n), concurrency: PARAMS.concurrency, check: () => undefined, timeoutMs: 30_000 })
        await run(PARAMS.warmup)
        // What the idle service uses meanwhile (workers' polls, their spans when tracing is on) is not the route's cost.
        const idleFrom = cpuMs(service.pid)
        await sleep(2_000)
        const idleMsPerMs = (cpuMs(service.pid) - idleFrom) / 2_000
        const cpuFrom = cpuMs(service.pid)
        const bytesFrom = sink.stats.bytes
        const result = await run(PARAMS.requests)
        await sleep(300) // the last batch of spans leaves within the export interval's reach
        const cpu = cpuMs(service.pid) - cpuFrom - idleMsPerMs * (result.wallMs + 300)
        if (result.errors > 0) throw new Error(`${route.name}: ${result.errors} errors, e.g. ${result.errorSamples[0]}`)
        const sample: Sample = {
          mode: mode.name,
          route: route.name,
          rps: (PARAMS.requests * 1000) / result.wallMs,
          cpuMsPerRequest: cpu / PARAMS.requests,
          p50: percentile(result.latenciesMs, 50),
          p99: percentile(result.latenciesMs, 99),
          exportedBytesPerRequest: (sink.stats.bytes - bytesFrom) / PARAMS.requests
        }
        samples.push(sample)
        log(`  round ${round} · ${mode.name} · ${route.name}: ${sample.rps.toFixed(0)} req/s, ${sample.cpuMsPerRequest.toFixed(3)} ms CPU/request, ${sample.exportedBytesPerRequest.toFixed(0)} B exported/request`)
      }
      await service.stop()
    }
  }

  const rows = MODES.flatMap((mode) =>
    ROUTES.map((route) => {
      const mine = samples.filter((s) => s.mode === mode.name && s.route === route.name)
      const base = samples.filter((s) => s.mode === MODES[0].name && s.route === route.name)
      const cpu = median(mine.map((s) => s.cpuMsPerRequest))
      const baseCpu = median(base.map((s) => s.cpuMsPerRequest))
      const vs = mode === MODES[0] ? "" : `${cpu >= baseCpu ? "+" : ""}${(((cpu - baseCpu) / baseCpu) * 100).toFixed(0)} %`
      return `| ${route.name} | ${mode.name} | ${median(mine.map((s) => s.rps)).toFixed(0)} | ${cpu.toFixed(3)} | ${vs} | ${median(mine.map((s) => s.p50)).toFixed(1)} / ${median(mine.map((s) => s.p99)).toFixed(1)} | ${median(mine.map((s) => s.exportedBytesPerRequest)).toFixed(0)} |`
    }))
  const costs = ROUTES.map((route) => {
    const cpuOf = (mode: string) => median(samples.filter((s) => s.mode === mode && s.route === route.name).map((s) => s.cpuMsPerRequest))
    return ((cpuOf(MODES[1].name) - cpuOf(MODES[0].name)) / cpuOf(MODES[0].name)) * 100
  })
  const commit = (() => {
    try {
      return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim()
    } catch {
      return "?"
    }
  })()
  const section = [
    "## Tracing and request logs (bench/tracing.ts)",
    "",
    `Generated by \`npx tsx bench/tracing.ts\` on **${startedAt.toISOString().slice(0, 10)}** (code at ${commit}, \`nproc\` ${os.cpus().length}). Only this section is rewritten by that run.`,
    "",
    `- ${PARAMS.rounds} rounds; in each, every mode on a freshly started service: ${PARAMS.warmup} warm-up requests, then ${PARAMS.requests} per route at concurrency ${PARAMS.concurrency} (undici, closed loop, keep-alive). Medians of the rounds.`,
    "- *CPU/request*: the service process's CPU over the measured window, less what it used idle just before (background workers, and their spans when tracing is on), over the requests.",
    "- Tracing on: every request's spans (HTTP server span, handler spans, one per SQL statement) batched every 5 s to a sink in the bench process over OTLP/HTTP protobuf (the sink's CPU is not counted).",
    `- Load average before ${loadBefore}, after ${loadAverage()} (the machine has ${os.cpus().length} cores: a load near or above that means other work skewed req/s and latencies; CPU per request less so).`,
    "",
    "| Route | Mode | req/s | CPU ms/request | CPU vs off | p50 / p99 ms | exported B/request |",
    "|---|---|---:|---:|---:|---:|---:|",
    ...rows,
    "",
    `- Reading: recording and exporting spans added ${Math.min(...costs).toFixed(0)}-${Math.max(...costs).toFixed(0)} % CPU per request here; ${Math.min(...costs) >= 20 ? "that is large, so tracing stays off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (off, the HTTP server opens no span at all)" : "small enough to turn on where traces are wanted"}.`,
    "  The last mode differs from the first only by the request log line (at info, written to a pipe): the difference between them is that line's cost, within this run's noise."
  ].join("\n")
  log(`\n${section}`)
  if (PARAMS.output !== "-") {
    await writeSection(PARAMS.output, "tracing", section)
    log(`wrote ${PARAMS.output}`)
  }
}

main()
  .then(() => cleanupAll())
  .then(() => process.exit(0))
  .catch(async (error) => {
    console.error(error)
    await cleanupAll()
    process.exit(1)
  })
