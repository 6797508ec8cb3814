// Diagnostics when a target is missed: round trips per request through counting proxies, and CPU profiles under load.
import { copyFile, mkdir, readdir, writeFile } from "node:fs/promises"
import * as path from "node:path"
import { onCleanup } from "./children.js"
import { checkEcho, checkExecution, marketplaceJobs, paywallJobs, sign } from "./jobs.js"
import { percentile, runClosedLoop } from "./load.js"
import { BenchError, log, PARAMS, ROOT, sleep } from "./params.js"
import { type ProfileSummary, summariseProfile } from "./profile.js"
import { type PgStats, type RpcStats, startPgProxy, startRpcProxy } from "./proxies.js"
import { type Infra, startMarketplace, startPaywall } from "./servers.js"
import type { ChainSnapshot } from "./snapshot.js"
import type { DiagnosticsResult } from "./types.js"

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
    : await startMarketplace(infra, { name: "marketplace (profiled)", nodeArgs, fromSource: true })
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

export const diagnostics = async (infra: Infra, agentId: string, start: ChainSnapshot): Promise<DiagnosticsResult> => {
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
