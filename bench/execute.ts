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
// BENCH_C32_WARMUP (200), BENCH_WEB_CONCURRENCY (1: the marketplace phase's server processes), BENCH_AGENT=child|inline (child), BENCH_PROFILE=auto|always|never (auto: when a target is
// missed), BENCH_PROFILE_CONCURRENCY (32: the profiled runs' concurrency), BENCH_OUTPUT (docs/performance.md), BENCH_KEEP_PROFILES (a directory
// to keep the .cpuprofile files in).
//
// The parts: bench/lib/params.ts (settings), servers.ts (processes), snapshot.ts (chain + database snapshots),
// jobs.ts (requests and checks), measure.ts (one phase), settlementProbe.ts (one signer's ceiling), diagnostics.ts
// (round trips and CPU profiles), report.ts (docs/performance.md).
import * as path from "node:path"
import { cleanupAll, installSignalHandlers, onCleanup } from "./lib/children.js"
import { diagnostics } from "./lib/diagnostics.js"
import { scrapeMetrics, startWebhookReceiver, subscribeEverything } from "./lib/features.js"
import { checkEcho, checkExecution, directJobs, input, marketplaceJobs, paywallJobs, registerAgent, sign } from "./lib/jobs.js"
import { machineInfo } from "./lib/machine.js"
import { measure, samplerFor } from "./lib/measure.js"
import { BenchError, log, ms, PARAMS, postJson, PRICE, ROOT } from "./lib/params.js"
import { paymentRequests, signAll } from "./lib/payments.js"
import { PoolWatchdog } from "./lib/pool-watchdog.js"
import { writeReport } from "./lib/report.js"
import { paywallTiming, servingPid, startInfra, startMarketplace, startPaywall } from "./lib/servers.js"
import { logSettlement, measureSettlement } from "./lib/settlementProbe.js"
import { blockNumber, ChainSnapshot } from "./lib/snapshot.js"
import type { BenchReport, DiagnosticsResult, PhaseResult, SettlementResult, TargetName } from "./lib/types.js"

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
  // Every feature on: the agent's owner (dev account 1) subscribes a webhook to every event; /metrics is scraped below.
  const receiver = await startWebhookReceiver()
  onCleanup("webhook receiver", () => receiver.close())
  await subscribeEverything(setup.origin, agentId, 1, receiver.url)
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
      const workers = PARAMS.webConcurrency
      const server = await startMarketplace(infra, { name: `marketplace c=${concurrency}`, webConcurrency: workers })
      try {
        const serverPid = servingPid(server)
        const sampler = samplerFor(infra, serverPid, true, workers > 1)
        const scraper = scrapeMetrics(server.origin)
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
            serverPid,
            sampler,
            outputBytes: server.child.outputBytes,
            rpcUrl: infra.rpcUrl,
            serverTree: workers > 1
          })
        )
        const scrapes = scraper.stop()
        log(`    features on: ${scrapes} /metrics scrapes, ${receiver.received()} webhook deliveries received so far`)
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
  const peakMiB = find("marketplace", highC).peakRssKb / 1024
  const targets = {
    throughput: { concurrency: highC, ratio: throughputRatio, goal: 1.0, met: throughputRatio >= 1.0 },
    latency: { concurrency: lowC, addedP50Ms: addedP50, goalMs: 5, met: addedP50 <= 5 },
    memory: { concurrency: highC, peakMiB, goalMiB: 250, met: peakMiB <= 250 }
  }
  log(
    `  targets: c=${highC} throughput ${(100 * throughputRatio).toFixed(0)}% of the paywall (goal ≥ 100%: ${targets.throughput.met ? "met" : "MISSED"}); ` +
      `c=${lowC} p50 +${ms(addedP50)} ms over the paywall (goal ≤ 5 ms: ${targets.latency.met ? "met" : "MISSED"}); ` +
      `c=${highC} peak RSS ${peakMiB.toFixed(0)} MiB (goal ≤ 250 MiB: ${targets.memory.met ? "met" : "MISSED"})`
  )

  const runDiagnostics = PARAMS.profile === "always" || (PARAMS.profile === "auto" && !(targets.throughput.met && targets.latency.met && targets.memory.met))
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
      webConcurrency: PARAMS.webConcurrency,
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
