// `npm run bench:levers`: the measures of issue 29's levers that hold on a loaded machine (nothing here is a
// throughput: CPU time per paid call, statements per paid call, a CPU profile's shares, idle RSS). One marketplace
// against the bench's anvil, PostgreSQL and echo agent (bench/lib/servers.ts), every phase on the same chain snapshot:
//   1. idle RSS of the service (the bundle, as `npm start` runs it) 3 s after /health answers, then its idle CPU over 10 s
//      (service and PostgreSQL: the background workers' polling);
//   2. c=32: CPU per paid call of the service and of PostgreSQL (utime+stime from /proc over the measured calls);
//   3. c=1 through the counting proxies: PostgreSQL statements, round trips and transactions per paid call (background
//      work included) and chain calls;
//   4. c=32 from the sources under `node --cpu-prof`: the top 15 functions by self time and the areas;
//   5. c=1 latency, no proxies: p50/p99 of BENCH_LEVERS_LATENCY calls (200) after 20 warm-up calls, and CPU per call
//      (service, PostgreSQL, anvil); with BENCH_LEVERS_LATENCY_PROFILE=1 a second c=1 run from the sources under
//      `node --cpu-prof` (kept in BENCH_KEEP_PROFILES as <label>-c1.cpuprofile).
// Writes JSON (BENCH_LEVERS_OUT, default bench/levers/<label>.json) and prints a summary; BENCH_LEVERS_LABEL names the run.
// Settings: BENCH_LEVERS_REQUESTS (600 at c=32), BENCH_LEVERS_COUNTED (100 at c=1), BENCH_LEVERS_PROFILE (1: run step 4),
// BENCH_LEVERS_WEBHOOK (0: a `*` webhook subscribed in every phase when 1), BENCH_LEVERS_DOC (1: write the `levers`
// section of docs/performance.md, this run against bench/levers/before.json: bench/lib/leversReport.ts), BENCH_KEEP_PROFILES (a directory to keep the
// .cpuprofile in), BENCH_LEVERS_STEPS (which steps run, default "cpu,counted,profile,latency": an A/B of the c=1 latency
// alone is BENCH_LEVERS_STEPS=latency). About a minute and a half on 2 cores.
import { copyFile, mkdir, readdir, writeFile } from "node:fs/promises"
import * as path from "node:path"
import { cleanupAll, installSignalHandlers, onCleanup } from "./lib/children.js"
import { startWebhookReceiver, subscribeEverything } from "./lib/features.js"
import { checkExecution, input, marketplaceJobs, registerAgent, sign } from "./lib/jobs.js"
import { runClosedLoop } from "./lib/load.js"
import { BenchError, intEnv, log, postJson, ROOT, sleep } from "./lib/params.js"
import { type LeversRun, writeLeversSection } from "./lib/leversReport.js"
import { summariseProfile } from "./lib/profile.js"
import { cpuMs, memoryKb, treeCpuMs } from "./lib/proc.js"
import { startPgProxy, startRpcProxy } from "./lib/proxies.js"
import { type Infra, postmasterPid, servingPid, startInfra, startMarketplace } from "./lib/servers.js"
import { ChainSnapshot } from "./lib/snapshot.js"
import { execSync } from "node:child_process"

const label = process.env["BENCH_LEVERS_LABEL"] ?? "run"
const requests = intEnv("BENCH_LEVERS_REQUESTS", 600)
const counted = intEnv("BENCH_LEVERS_COUNTED", 100)
const profile = intEnv("BENCH_LEVERS_PROFILE", 1) === 1
const webhook = intEnv("BENCH_LEVERS_WEBHOOK", 0) === 1
const latencyCalls = intEnv("BENCH_LEVERS_LATENCY", 200)
const latencyProfile = intEnv("BENCH_LEVERS_LATENCY_PROFILE", 0) === 1
const steps = new Set((process.env["BENCH_LEVERS_STEPS"] ?? "cpu,counted,profile,latency").split(",").map((x) => x.trim()))
/** BENCH_LEVERS_ENV="A=1,B=2": more environment for the service (A/B runs of a switch). */
const env = Object.fromEntries((process.env["BENCH_LEVERS_ENV"] ?? "").split(",").filter((kv) => kv.includes("=")).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]))
/** BENCH_LEVERS_NODE_ARGS="--flag=1 --other": Node options for the service (as `npm start`'s own). */
const nodeArgs = (process.env["BENCH_LEVERS_NODE_ARGS"] ?? "").split(" ").filter((a) => a !== "")
const out = process.env["BENCH_LEVERS_OUT"] ?? path.join(ROOT, "bench", "levers", `${label}.json`)

const cpuRun = async (infra: Infra, agentId: string, receiverUrl: string) => {
  const server = await startMarketplace(infra, { name: "marketplace (cpu)", env, nodeArgs })
  try {
    const pid = servingPid(server)
    await sleep(3_000)
    const idleKb = memoryKb(pid)?.rss ?? 0
    // Idle: what the background workers cost with no request (ms of CPU per second; 10 ms/s = 1% of a core).
    const pgIdle = postmasterPid(infra.pgDir)
    const idleBefore = { server: cpuMs(pid), postgres: treeCpuMs(pgIdle) }
    await sleep(10_000)
    const idleCpuMsPerSecond = { server: (cpuMs(pid) - idleBefore.server) / 10, postgres: (treeCpuMs(pgIdle) - idleBefore.postgres) / 10 }
    if (webhook) await subscribeEverything(server.origin, agentId, 1, receiverUrl)
    const jobs = marketplaceJobs(agentId, await sign(100 + requests), 0)
    const common = { origin: server.origin, path: "/api/v1/execute", concurrency: 32, check: checkExecution }
    const warm = await runClosedLoop({ ...common, jobs: jobs.slice(0, 100) })
    const pg = postmasterPid(infra.pgDir)
    const before = { server: cpuMs(pid), postgres: treeCpuMs(pg), anvil: cpuMs(infra.anvilPid) }
    const run = await runClosedLoop({ ...common, jobs: jobs.slice(100) })
    const after = { server: cpuMs(pid), postgres: treeCpuMs(pg), anvil: cpuMs(infra.anvilPid) }
    if (warm.errors + run.errors > 0) throw new BenchError(`cpu run: errors ${run.errorSamples.join("\n")}`)
    const per = (k: keyof typeof before) => (after[k] - before[k]) / run.requests
    return {
      idleRssMiB: idleKb / 1024,
      idleCpuMsPerSecond,
      peakRssMiB: (memoryKb(pid)?.hwm ?? 0) / 1024,
      reqPerS: (1000 * run.requests) / run.wallMs,
      cpuMsPerCall: { server: per("server"), postgres: per("postgres"), anvil: per("anvil") }
    }
  } finally {
    await server.child.stop()
  }
}

const countedRun = async (infra: Infra, agentId: string, receiverUrl: string) => {
  const rpc = await startRpcProxy(infra.rpcUrl)
  const forgetRpc = onCleanup("rpc proxy", () => rpc.close())
  const pgProxy = await startPgProxy(infra.pgHost, infra.pgPort)
  const forgetPg = onCleanup("pg proxy", () => pgProxy.close())
  const db = infra.databaseUrl.replace(`@${infra.pgHost}:${infra.pgPort}/`, `@${pgProxy.url}/`)
  const server = await startMarketplace(infra, { name: "marketplace (counted)", rpcUrl: rpc.url, databaseUrl: db, env, nodeArgs })
  try {
    if (webhook) await subscribeEverything(server.origin, agentId, 1, receiverUrl)
    const jobs = marketplaceJobs(agentId, await sign(counted + 10), 0)
    const common = { origin: server.origin, path: "/api/v1/execute", concurrency: 1, check: checkExecution }
    await runClosedLoop({ ...common, jobs: jobs.slice(0, 10) })
    await sleep(300)
    rpc.reset()
    pgProxy.reset()
    const run = await runClosedLoop({ ...common, jobs: jobs.slice(10) })
    await sleep(500) // background work of the last calls
    const s = pgProxy.stats()
    const r = rpc.stats()
    if (run.errors > 0) throw new BenchError(`counted run: ${run.errorSamples.join("\n")}`)
    const n = run.requests
    return {
      pg: {
        roundTrips: s.roundTrips / n,
        statements: s.statements / n,
        transactions: s.transactions / n,
        waitMs: s.waitMs / n,
        byStatement: [...s.byStatement.entries()].sort((a, b) => b[1].count - a[1].count).slice(0, 30).map(([k, c]) => ({ statement: k, perCall: c.count / n, meanMs: c.totalMs / c.count }))
      },
      rpc: { calls: r.calls / n, httpRequests: r.requests / n, byMethod: [...r.byMethod.entries()].map(([k, c]) => ({ method: k, perCall: c.count / n })) }
    }
  } finally {
    await server.child.stop()
    await pgProxy.close()
    forgetPg()
    await rpc.close()
    forgetRpc()
  }
}

const quantile = (sorted: Float64Array, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0

/** c=1 without proxies: what a lone caller waits (p50/p99) and what each call costs in CPU; optionally profiled. */
const latencyRun = async (infra: Infra, agentId: string, receiverUrl: string, profiled: boolean) => {
  const dir = path.join(infra.tmp, `profile-c1-${Date.now()}`)
  const server = await startMarketplace(infra, {
    name: profiled ? "marketplace (c=1, profiled)" : "marketplace (c=1)",
    env,
    ...(profiled ? { nodeArgs: [...nodeArgs, "--cpu-prof", `--cpu-prof-dir=${dir}`], fromSource: true } : { nodeArgs })
  })
  let window = { fromUs: 0, toUs: 0 }
  try {
    if (webhook) await subscribeEverything(server.origin, agentId, 1, receiverUrl)
    const pid = profiled ? server.child.pid : servingPid(server)
    const jobs = marketplaceJobs(agentId, await sign(20 + latencyCalls), 0)
    const common = { origin: server.origin, path: "/api/v1/execute", concurrency: 1, check: checkExecution }
    await runClosedLoop({ ...common, jobs: jobs.slice(0, 20) })
    await sleep(300)
    const pg = postmasterPid(infra.pgDir)
    const before = { server: cpuMs(pid), postgres: treeCpuMs(pg), anvil: cpuMs(infra.anvilPid) }
    const fromUs = Number(process.hrtime.bigint() / 1000n)
    const run = await runClosedLoop({ ...common, jobs: jobs.slice(20) })
    window = { fromUs, toUs: Number(process.hrtime.bigint() / 1000n) }
    const after = { server: cpuMs(pid), postgres: treeCpuMs(pg), anvil: cpuMs(infra.anvilPid) }
    if (run.errors > 0) throw new BenchError(`c=1 run: ${run.errorSamples.join("\n")}`)
    const sorted = Float64Array.from(run.latenciesMs).sort()
    const per = (k: keyof typeof before) => (after[k] - before[k]) / run.requests
    if (profiled) await server.child.stop(20_000)
    const result = {
      calls: run.requests,
      p50Ms: quantile(sorted, 0.5),
      p90Ms: quantile(sorted, 0.9),
      p99Ms: quantile(sorted, 0.99),
      meanMs: sorted.reduce((a, b) => a + b, 0) / sorted.length,
      cpuMsPerCall: { server: per("server"), postgres: per("postgres"), anvil: per("anvil") }
    }
    return result
  } finally {
    await server.child.stop()
    const keep = process.env["BENCH_KEEP_PROFILES"]
    if (profiled && keep !== undefined && keep !== "") {
      const file = (await readdir(dir).catch(() => [])).find((f) => f.endsWith(".cpuprofile"))
      if (file !== undefined) {
        await mkdir(keep, { recursive: true })
        await copyFile(path.join(dir, file), path.join(keep, `${label}-c1.cpuprofile`))
        await writeFile(path.join(keep, `${label}-c1.window.json`), JSON.stringify(window))
      }
    }
  }
}

const profileRun = async (infra: Infra, agentId: string, receiverUrl: string) => {
  const dir = path.join(infra.tmp, `profile-${Date.now()}`)
  const server = await startMarketplace(infra, { name: "marketplace (profiled)", nodeArgs: [...nodeArgs, "--cpu-prof", `--cpu-prof-dir=${dir}`], fromSource: true, env })
  let window = { fromUs: 0, toUs: 0 }
  try {
    if (webhook) await subscribeEverything(server.origin, agentId, 1, receiverUrl)
    const jobs = marketplaceJobs(agentId, await sign(500), 0)
    const common = { origin: server.origin, path: "/api/v1/execute", concurrency: 32, check: checkExecution }
    await runClosedLoop({ ...common, jobs: jobs.slice(0, 100) })
    const fromUs = Number(process.hrtime.bigint() / 1000n)
    const run = await runClosedLoop({ ...common, jobs: jobs.slice(100) })
    window = { fromUs, toUs: Number(process.hrtime.bigint() / 1000n) }
    if (run.errors > 0) throw new BenchError(`profiled run: ${run.errorSamples.join("\n")}`)
    await server.child.stop(20_000)
  } finally {
    await server.child.stop()
  }
  const file = (await readdir(dir)).find((f) => f.endsWith(".cpuprofile"))
  if (file === undefined) throw new BenchError("no .cpuprofile")
  const keep = process.env["BENCH_KEEP_PROFILES"]
  if (keep !== undefined && keep !== "") {
    await mkdir(keep, { recursive: true })
    await copyFile(path.join(dir, file), path.join(keep, `${label}.cpuprofile`))
    await writeFile(path.join(keep, `${label}.window.json`), JSON.stringify(window))
  }
  const s = summariseProfile(path.join(dir, file), ROOT, window.fromUs, window.toUs)
  const n = 400
  const perCall = (xs: ReadonlyArray<{ name: string; ms: number; pct: number }>, k: number) =>
    xs.slice(0, k).map((x) => ({ name: x.name, msPerCall: x.ms / n, pct: x.pct }))
  return { busyMsPerCall: s.busyMs / n, top15: perCall(s.topSelf, 15), areas: perCall(s.byArea, 14), app: perCall(s.inclusiveApp, 15), library: perCall(s.inclusiveLibrary, 12),
    callers: s.callers.map((c) => ({ name: c.name, msPerCall: c.ms / n, via: c.via.map((v) => `${v.name} ${(v.ms / n).toFixed(2)}`) })) }
}

const main = async () => {
  installSignalHandlers()
  const started = Date.now()
  const infra = await startInfra()
  const receiver = await startWebhookReceiver()
  onCleanup("webhook receiver", () => receiver.close())
  const setup = await startMarketplace(infra, { name: "marketplace (setup)" })
  const agentId = await registerAgent(infra, setup.origin)
  {
    const [smoke] = await sign(1)
    if (smoke === undefined) throw new BenchError("signing failed")
    const r = await postJson(`${setup.origin}/api/v1/execute`, { targetAgentId: agentId, capabilityId: "echo", input: input(0) }, { "x-payment": smoke.header })
    if (r.status !== 200) throw new BenchError(`smoke: ${r.text}`)
  }
  await setup.child.stop()
  const start = await ChainSnapshot.take(infra.rpcUrl, infra)
  const load = () => execSync("cat /proc/loadavg").toString().trim()
  const result: Record<string, unknown> = { label, env, nodeArgs, commit: execSync("git rev-parse --short HEAD").toString().trim(), webhook, loadAtStart: load() }
  if (steps.has("cpu")) {
    log(`levers [${label}]: cpu run (c=32, ${requests} calls)`)
    result["cpu"] = await cpuRun(infra, agentId, receiver.url)
    log(JSON.stringify(result["cpu"]))
    await start.restore()
  }
  if (counted > 0 && steps.has("counted")) {
    log(`levers [${label}]: counted run (c=1, ${counted} calls)`)
    result["counted"] = await countedRun(infra, agentId, receiver.url)
    const c = result["counted"] as Awaited<ReturnType<typeof countedRun>>
    log(`  pg: ${c.pg.statements.toFixed(2)} statements, ${c.pg.roundTrips.toFixed(2)} round trips, ${c.pg.transactions.toFixed(2)} transactions per call; rpc ${c.rpc.calls.toFixed(2)} calls in ${c.rpc.httpRequests.toFixed(2)} HTTP requests`)
    await start.restore()
  }
  if (profile && steps.has("profile")) {
    log(`levers [${label}]: profiled run (c=32, 400 calls, from the sources)`)
    result["profile"] = await profileRun(infra, agentId, receiver.url)
    const p = result["profile"] as Awaited<ReturnType<typeof profileRun>>
    log(`  busy ${p.busyMsPerCall.toFixed(2)} ms/call`)
    for (const f of p.top15) log(`    ${f.msPerCall.toFixed(2)} ms ${f.pct.toFixed(1)}% ${f.name}`)
    for (const f of p.areas) log(`    area ${f.msPerCall.toFixed(2)} ms ${f.pct.toFixed(1)}% ${f.name}`)
    await start.restore()
  }
  if (latencyCalls > 0 && steps.has("latency")) {
    log(`levers [${label}]: c=1 latency (${latencyCalls} calls, no proxies)`)
    result["latency"] = await latencyRun(infra, agentId, receiver.url, false)
    log(`  c=1 ${JSON.stringify(result["latency"])}`)
    await start.restore()
    if (latencyProfile) {
      log(`levers [${label}]: c=1 profiled (${latencyCalls} calls, from the sources)`)
      result["latencyProfiled"] = await latencyRun(infra, agentId, receiver.url, true)
      log(`  c=1 profiled ${JSON.stringify(result["latencyProfiled"])}`)
      await start.restore()
    }
  }
  result["loadAtEnd"] = load()
  result["seconds"] = (Date.now() - started) / 1000
  await mkdir(path.dirname(out), { recursive: true })
  await writeFile(out, JSON.stringify(result, null, 2))
  log(`wrote ${path.relative(ROOT, out)} in ${result["seconds"]} s`)
  if (process.env["BENCH_LEVERS_DOC"] === "1") {
    const doc = process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md")
    await writeLeversSection(doc, path.join(ROOT, "bench", "levers", "before.json"), result as unknown as LeversRun)
    log(`wrote the levers section of ${path.relative(ROOT, doc)}`)
  }
}

main()
  .then(async () => {
    await cleanupAll()
    process.exit(0)
  })
  .catch(async (error: unknown) => {
    console.error(`\nbench:levers failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`)
    await cleanupAll()
    process.exit(1)
  })
