// Benchmark of discovery (`npx tsx bench/discover.ts`): seeds 100,000 agents built from the ranking fixture's vocabulary,
// measures p50/p99 of typical GET /api/v1/discover (filters, q, pagination) and /discover/search requests over HTTP at
// concurrency 1 and 16, and shows the plans of the statements behind them (EXPLAIN (ANALYZE, BUFFERS)). Writes its
// section of docs/performance.md (between the `bench:discover` markers; the rest of the file is left alone).
//
// Real parts only: one anvil and one embedded PostgreSQL started here, the service as a child process
// (`node --import tsx src/main.ts`), the load generator (undici, closed loop, GET) in this process.
//
// Settings (environment): BENCH_AGENTS (100000), BENCH_C1_REQUESTS (300), BENCH_C16_REQUESTS (1500), BENCH_WARMUP (100),
// BENCH_OUTPUT (docs/performance.md), BENCH_DATABASE_URL (an already seeded database: skips start-up of PostgreSQL
// and the seeding when it holds the agents).
import { PgClient } from "@effect/sql-pg"
import { SqlClient, Statement } from "@effect/sql"
import { Effect, Layer, ManagedRuntime, Redacted, Schema, String as Str } from "effect"
import { chmod, mkdtemp, rm } from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { execFileSync } from "node:child_process"
import { startDevnet } from "../layers/devnet/anvil.js"
import { freePort, startEmbeddedPostgres } from "../layers/embeddedPostgres.js"
import { Discovery } from "../services/discovery/Discovery.js"
import { DiscoverParams, SearchParams } from "../src/domain/Discovery.js"
import { agentRow } from "../test/fixtures/catalogue/seed.js"
import { prng, syntheticAgent } from "./lib/catalogue.js"
import { baseEnv, cleanupAll, installSignalHandlers, onCleanup, spawnChild } from "./lib/children.js"
import { discoverWorkload as workload, type Kind } from "./lib/discoverWorkload.js"
import { cpuMs, postgresCpuMs, postmasterPid } from "./lib/proc.js"
import { percentile, runClosedLoop } from "./lib/load.js"
import { writeSection } from "./lib/sections.js"

const intEnv = (name: string, fallback: number) => {
  const raw = process.env[name]
  const n = raw === undefined ? fallback : Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer`)
  return n
}

const ROOT = process.cwd()
const PARAMS = {
  agents: intEnv("BENCH_AGENTS", 100_000),
  warmup: intEnv("BENCH_WARMUP", 100),
  levels: [
    { concurrency: 1, requests: intEnv("BENCH_C1_REQUESTS", 300) },
    { concurrency: 16, requests: intEnv("BENCH_C16_REQUESTS", 1500) }
  ],
  output: process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md"),
  databaseUrl: process.env["BENCH_DATABASE_URL"]
}
/** Targets of issue 7 for p99 on this machine. */
const TARGETS = { filters: 20, text: 20, search: 50 } as const

const log = (line: string) => console.log(line)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const f1 = (n: number) => n.toFixed(1)


interface Result {
  readonly kind: Kind
  readonly concurrency: number
  readonly requests: number
  readonly wallMs: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
  readonly errors: number
  readonly serverCpuMsPerRequest: number
  readonly postgresCpuMsPerRequest: number
}

/** GET every path once, `concurrency` at a time (the shared closed-loop generator); any non-200 is an error. */
const runGets = async (origin: string, paths: ReadonlyArray<string>, concurrency: number) => {
  const run = await runClosedLoop({ origin, path: "/", jobs: paths.map((p) => ({ headers: {}, path: p })), concurrency, check: () => undefined, timeoutMs: 30_000 })
  for (const s of run.errorSamples.slice(0, 3)) log(`  error: ${s}`)
  return { latencies: run.latenciesMs, wallMs: run.wallMs, errors: run.errors }
}

// ---------------------------------------------------------------------------------------------------------------
// infrastructure

const waitHealthy = async (origin: string, alive: () => boolean, output: () => string) => {
  const deadline = Date.now() + 120_000
  for (;;) {
    if (!alive()) throw new Error(`the service exited during start-up:\n${output()}`)
    try {
      const response = await fetch(`${origin}/health`, { signal: AbortSignal.timeout(2_000) })
      await response.arrayBuffer()
      if (response.status === 200) return
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the service did not become healthy:\n${output()}`)
    await sleep(100)
  }
}

const clientOptions = {
  transformQueryNames: Str.camelToSnake,
  transformResultNames: Str.snakeToCamel,
  transformJson: false
} as const

// ---------------------------------------------------------------------------------------------------------------
// plans: run a service call with every statement it executes also run under EXPLAIN (ANALYZE, BUFFERS)

const explained = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const plans: Array<{ readonly statement: string; readonly plan: string }> = []
    yield* effect.pipe(
      Statement.withTransformer((statement) =>
        Effect.gen(function* () {
          const [text, params] = statement.compile()
          const rows = yield* sql.unsafe<Record<string, string>>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params).pipe(
            Statement.withTransformerDisabled
          )
          plans.push({ statement: text, plan: rows.map((r) => Object.values(r).join("")).join("\n") })
          return statement
        }).pipe(Effect.orDie))
    )
    return plans
  })

// ---------------------------------------------------------------------------------------------------------------
// the run


const main = async () => {
  installSignalHandlers()
  const startedAt = Date.now()
  const tmp = await mkdtemp(path.join(os.tmpdir(), "marketplace-bench-discover-"))
  await chmod(tmp, 0o755)
  onCleanup("temp dir", () => rm(tmp, { recursive: true, force: true }))

  log("starting anvil and PostgreSQL…")
  const devnet = await startDevnet({ port: 0, compileCacheDir: "node_modules/.cache/test-usdc" })
  onCleanup("anvil", () => devnet.stop())
  let databaseUrl = PARAMS.databaseUrl
  let pgPid = 0
  if (databaseUrl === undefined) {
    const pgDir = path.join(tmp, "pg")
    const pg = await startEmbeddedPostgres({ databaseDir: pgDir, persistent: false, database: "marketplace" })
    onCleanup("postgres", () => Promise.race([pg.stop(), sleep(10_000)]).then(() => undefined))
    databaseUrl = pg.url
    pgPid = postmasterPid(pg.databaseDir)
  }

  log("starting the service (runs the migrations)…")
  const port = await freePort()
  const service = spawnChild("service", process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: {
      ...baseEnv(),
      DEVNET_RPC_URL: devnet.rpcUrl,
      DATABASE_URL: databaseUrl,
      DATA_DIR: path.join(tmp, "service-data"),
      HOST: "127.0.0.1",
      PORT: String(port),
      OPERATOR_TOKEN: "bench-operator-token-123456",
      HEALTH_PROBE_INTERVAL_MS: "3600000"
    }
  })
  const origin = `http://127.0.0.1:${port}`
  await waitHealthy(origin, service.alive, service.output)

  const runtime = ManagedRuntime.make(
    Discovery.Default.pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), ...clientOptions })))
  )
  onCleanup("runtime", () => runtime.dispose().then(() => undefined))

  // -- seed
  const seeded = await runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM agents`
      const started = Date.now()
      const analyse = Effect.forEach(["agents", "agent_listing", "agent_terms", "search_terms"], (table) => sql.unsafe(`VACUUM ANALYZE ${table}`), { discard: true })
      if ((row?.n ?? 0) >= PARAMS.agents) return yield* Effect.as(analyse, { seconds: 0, reused: true })
      const random = prng(7)
      for (let i = 0; i < PARAMS.agents; i += 1_000) {
        const rows = Array.from({ length: Math.min(1_000, PARAMS.agents - i) }, (_, j) =>
          agentRow(syntheticAgent(random, i + j), i + j, 0xbe, new Date(Date.UTC(2026, 0, 1) + (i + j) * 1_000)))
        yield* sql`INSERT INTO agents ${sql.insert(rows)}`
        if ((i / 1_000) % 20 === 0) log(`  seeded ${i + rows.length} agents`)
      }
      yield* analyse
      return { seconds: (Date.now() - started) / 1000, reused: false }
    })
  )
  const stats = await runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ agents: number; active: number; terms: number; bytes: string }>`
        SELECT (SELECT count(*)::int FROM agents) AS agents,
               (SELECT count(*)::int FROM agents WHERE status = 'active') AS active,
               (SELECT count(*)::int FROM search_terms) AS terms,
               pg_size_pretty(pg_total_relation_size('agent_listing') + pg_total_relation_size('agent_terms')) AS bytes`
      return row
    })
  )
  log(`catalogue: ${stats?.agents} agents (${stats?.active} active), ${stats?.terms} lexicon words, discovery tables ${stats?.bytes}` +
    (seeded.reused ? " (reused)" : ` (seeded in ${seeded.seconds.toFixed(0)} s)`))

  // -- load
  const servicePid = service.pid
  // The service's background workers (timers, settlement recovery, reconciliation) use CPU when idle too: measure it
  // and count only the rest per request.
  const idleBefore = cpuMs(servicePid)
  await sleep(3_000)
  const idleCpuPerMs = (cpuMs(servicePid) - idleBefore) / 3_000
  const loadBefore = os.loadavg()
  const results: Array<Result> = []
  let seed = 1
  for (const kind of ["filters", "text", "search"] as const) {
    await runGets(origin, workload(kind, PARAMS.warmup, 1000 + seed), 4)
    for (const level of PARAMS.levels) {
      const paths = workload(kind, level.requests, seed++)
      const cpuBefore = cpuMs(servicePid)
      const pgBefore = pgPid > 0 ? postgresCpuMs(pgPid) : 0
      const run = await runGets(origin, paths, level.concurrency)
      const result: Result = {
        kind,
        concurrency: level.concurrency,
        requests: paths.length,
        wallMs: run.wallMs,
        p50: percentile(run.latencies, 50),
        p90: percentile(run.latencies, 90),
        p99: percentile(run.latencies, 99),
        max: percentile(run.latencies, 100),
        errors: run.errors,
        serverCpuMsPerRequest: Math.max(0, cpuMs(servicePid) - cpuBefore - idleCpuPerMs * run.wallMs) / paths.length,
        postgresCpuMsPerRequest: pgPid > 0 ? (postgresCpuMs(pgPid) - pgBefore) / paths.length : Number.NaN
      }
      results.push(result)
      log(`${kind} c=${level.concurrency}: p50 ${f1(result.p50)} ms, p99 ${f1(result.p99)} ms, ` +
        `${f1(paths.length / (run.wallMs / 1000))} req/s, ${run.errors} errors`)
    }
  }

  const loadAfter = os.loadavg()

  // -- plans
  const decodeDiscover = Schema.decodeUnknownSync(DiscoverParams)
  const decodeSearch = Schema.decodeUnknownSync(SearchParams)
  const planCases: ReadonlyArray<{ readonly title: string; readonly run: (d: Discovery) => Effect.Effect<unknown, unknown, SqlClient.SqlClient> }> = [
    { title: "Listing, no filters (first page)", run: (d: Discovery) => d.discover(decodeDiscover({})) },
    { title: "Listing, tags + maxPrice + minReputation, third page", run: (d: Discovery) => d.discover(decodeDiscover({ tags: "translation,legal", maxPrice: "0.05", minReputation: "60", offset: "20" })) },
    { title: "Listing, capability substring + chainable", run: (d: Discovery) => d.discover(decodeDiscover({ capability: "forecast", chainable: "true" })) },
    { title: "Text: q=translate with maxPrice", run: (d: Discovery) => d.discover(decodeDiscover({ q: "translate", maxPrice: "0.01" })) },
    { title: "Search: \"wether forcast\" (typos)", run: (d: Discovery) => d.search(decodeSearch({ query: "wether forcast" })) },
    { title: "Search: \"I need an agent that can summarise meeting recordings\"", run: (d: Discovery) => d.search(decodeSearch({ query: "I need an agent that can summarise meeting recordings" })) }
  ]
  const plans: Array<{ readonly title: string; readonly plans: ReadonlyArray<{ readonly statement: string; readonly plan: string }> }> = []
  for (const c of planCases) {
    plans.push({ title: c.title, plans: await runtime.runPromise(Effect.flatMap(Discovery, (d) => explained(c.run(d)))) })
  }

  // -- report
  const git = (() => {
    try {
      return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim()
    } catch {
      return "?"
    }
  })()
  const cpu = os.cpus()[0]?.model ?? "?"
  const lines: Array<string> = [
    "## Discovery (bench/discover.ts)",
    "",
    `Generated by \`npx tsx bench/discover.ts\` on **${new Date(startedAt).toISOString().slice(0, 10)}** (code at ${git}, \`nproc\` ${os.cpus().length}, ${cpu}). ` +
      "Only this section is rewritten by that run.",
    "",
    `- Catalogue: **${stats?.agents} agents** (${stats?.active} active) generated from the ranking fixture's vocabulary (bench/lib/catalogue.ts), ` +
      `${stats?.terms} words in the typo lexicon; \`agent_listing\` and \`agent_terms\` take ${stats?.bytes}.`,
    "- Requests over HTTP (undici, closed loop, keep-alive) to the service as a child process; PostgreSQL embedded, durable settings.",
    `- Load average before the runs ${loadBefore.map((l) => l.toFixed(2)).join(", ")}, after ${loadAfter.map((l) => l.toFixed(2)).join(", ")} ` +
      "(other work on this 2-core machine skews the latencies; CPU per request is less affected). Service CPU per request excludes what its " +
      `background workers use when idle (${(idleCpuPerMs * 1000).toFixed(0)} ms per second).`,
    "- `filters`: /discover with random combinations of tags, maxPrice, minReputation, minHealth, chainable, capability, limit 10-50, offset 0-500.",
    "  `text`: /discover with `q` (one or two words), half of them with filters. `search`: /discover/search with the 61 graded fixture queries.",
    "",
    "| Workload | Concurrency | Requests | p50 ms | p90 ms | p99 ms | max ms | req/s | service CPU ms/req | PostgreSQL CPU ms/req | Errors | p99 target |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...results.map((r) =>
      `| ${r.kind} | ${r.concurrency} | ${r.requests} | ${f1(r.p50)} | ${f1(r.p90)} | ${f1(r.p99)} | ${f1(r.max)} | ` +
      `${f1(r.requests / (r.wallMs / 1000))} | ${r.serverCpuMsPerRequest.toFixed(2)} | ${Number.isNaN(r.postgresCpuMsPerRequest) ? "–" : r.postgresCpuMsPerRequest.toFixed(2)} | ${r.errors} | ` +
      `≤ ${TARGETS[r.kind]} ms: ${r.p99 <= TARGETS[r.kind] ? "met" : "**missed**"} |`),
    "",
    "### How discovery stays fast",
    "",
    "- One statement per request. Filters and sorts read `agent_listing`, one narrow row per agent (status, reputation, health, chaining,",
    "  cheapest price, tags, capability text) with partial indexes over active agents: reputation order, price order, newest, GIN on tags,",
    "  trigram GIN on capability text. Up to 1,001 matches are collected once: they are the `total` (capped at 1,000, `totalCapped`), and",
    "  when that is all of them the page is sorted from them; only when more match is the page read in index order, where matches are",
    "  dense. No request counts all 100,000 rows, and a filter that matches nothing never walks a whole index.",
    "- Text reads postings (`agent_terms`: stemmed word, agent, best field weight) best first through `(term, rank DESC)` and stops after",
    "  200 per word (60 per synonym; 1,000 when filters may drop most of them): the work depends on the query, not on the catalogue's size.",
    "  Typo correction and completion look words up in a small lexicon (trigram GIN).",
    "- Closed-loop latency at concurrency 16 is mostly queueing: 16 requests share 2 cores with PostgreSQL, anvil and the load generator,",
    "  so p50 is about 16 / throughput. The CPU per request is what to compare between runs.",
    "",
    "### Plans (EXPLAIN (ANALYZE, BUFFERS), on the seeded catalogue)",
    "",
    ...plans.flatMap((p) => [
      `#### ${p.title}`,
      "",
      ...p.plans.flatMap((s) => ["```", s.plan, "```", ""])
    ])
  ]
  const section = lines.join("\n")
  await writeSection(PARAMS.output, "discover", section)
  log(`wrote ${PARAMS.output}`)
}

main()
  .then(() => cleanupAll())
  .then(() => process.exit(0))
  .catch(async (error) => {
    console.error(error)
    await cleanupAll()
    process.exit(1)
  })
