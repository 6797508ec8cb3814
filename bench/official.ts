// `npm run bench:official`: the marketplace side by side with the official x402 stack (issue 29): `x402-express`
// `paymentMiddleware` in front of the same echo agent plus a local facilitator from the `x402` package (its own
// verify/settle), both unmodified from npm (bench/official, installed on demand). Same anvil snapshot for every phase,
// phases alternating (marketplace, marketplace with a `*` webhook and /metrics scraped, official; twice) so that drift
// hits every target; concurrency 1 and 32. Writes its own section of docs/performance.md (bench/lib/officialReport.ts).
//
// Settings (environment): BENCH_OFFICIAL_ROUNDS (2), BENCH_OFFICIAL_C1_REQUESTS (200), BENCH_OFFICIAL_C1_WARMUP (30),
// BENCH_OFFICIAL_C32_REQUESTS (800), BENCH_OFFICIAL_C32_WARMUP (100), BENCH_OFFICIAL_PROBE (200: paid calls at c=32
// against the facilitator with the package's own `createSigner`, which has no nonce manager; 0 skips it),
// BENCH_OFFICIAL_WEB_CONCURRENCY (1: the marketplace as `npm start` runs it; N > 1: WEB_CONCURRENCY=N, CPU and RSS of
// the whole server process tree), BENCH_OUTPUT (docs/performance.md).
import * as path from "node:path"
import { cleanupAll, installSignalHandlers, onCleanup } from "./lib/children.js"
import { scrapeMetrics, startWebhookReceiver, subscribeEverything } from "./lib/features.js"
import { checkEcho, checkExecution, input, marketplaceJobs, paywallJobs, registerAgent, sign } from "./lib/jobs.js"
import { runClosedLoop } from "./lib/load.js"
import { machineInfo } from "./lib/machine.js"
import { measure, samplerFor } from "./lib/measure.js"
import { ensureOfficialInstalled, startOfficial } from "./lib/official.js"
import { type OfficialPhase, type OfficialReport, type Variant, writeOfficialSection } from "./lib/officialReport.js"
import { BenchError, intEnv, log, PARAMS, postJson, ROOT } from "./lib/params.js"
import { PoolWatchdog } from "./lib/pool-watchdog.js"
import { memoryKb, processTree, RssSampler } from "./lib/proc.js"
import { type Infra, servingPid, startInfra, startMarketplace } from "./lib/servers.js"
import { ChainSnapshot } from "./lib/snapshot.js"

const SETTINGS = {
  rounds: intEnv("BENCH_OFFICIAL_ROUNDS", 2),
  levels: [
    { concurrency: 1, warmup: intEnv("BENCH_OFFICIAL_C1_WARMUP", 30), requests: intEnv("BENCH_OFFICIAL_C1_REQUESTS", 200) },
    { concurrency: 32, warmup: intEnv("BENCH_OFFICIAL_C32_WARMUP", 100), requests: intEnv("BENCH_OFFICIAL_C32_REQUESTS", 800) }
  ],
  probe: intEnv("BENCH_OFFICIAL_PROBE", 200),
  webConcurrency: intEnv("BENCH_OFFICIAL_WEB_CONCURRENCY", 1)
}

const idleRss = (pid: number) => memoryKb(pid)?.rss ?? 0

/** One marketplace phase (fresh service on the restored snapshot); `webhook`: a `*` subscription and /metrics scraped. */
const marketplacePhase = async (infra: Infra, agentId: string, variant: Variant, level: (typeof SETTINGS.levels)[number], round: number, receiverUrl: string) => {
  const { concurrency, warmup, requests } = level
  const workers = SETTINGS.webConcurrency
  const server = await startMarketplace(infra, { name: `${variant} c=${concurrency} #${round}`, webConcurrency: workers })
  try {
    const serverPid = servingPid(server)
    const tree = workers > 1
    const sampler = samplerFor(infra, serverPid, true, tree)
    const idleKb = tree ? processTree(serverPid).reduce((sum, pid) => sum + idleRss(pid), 0) : idleRss(serverPid)
    if (variant === "marketplace+webhook") await subscribeEverything(server.origin, agentId, 1, receiverUrl)
    const scraper = variant === "marketplace+webhook" ? scrapeMetrics(server.origin) : undefined
    const jobs = marketplaceJobs(agentId, await sign(warmup + requests), round * 100_000)
    try {
      const result = await measure(infra, {
        target: "marketplace",
        concurrency,
        origin: server.origin,
        path: "/api/v1/execute",
        warmup: jobs.slice(0, warmup),
        jobs: jobs.slice(warmup),
        check: checkExecution,
        serverPid,
        serverTree: tree,
        extraPids: { supervisor: server.child.pid },
        sampler,
        outputBytes: server.child.outputBytes,
        rpcUrl: infra.rpcUrl
      })
      return { variant, round, idleKb, result } satisfies OfficialPhase
    } finally {
      scraper?.stop()
    }
  } finally {
    await server.child.stop()
  }
}

const officialPhase = async (infra: Infra, level: (typeof SETTINGS.levels)[number], round: number) => {
  const { concurrency, warmup, requests } = level
  const stack = await startOfficial(infra, `official c=${concurrency} #${round}`, "nonce-manager")
  try {
    const appPid = stack.app.pid
    const facilitatorPid = stack.facilitator.pid
    const rss = new RssSampler({ server: () => idleRss(appPid), facilitator: () => idleRss(facilitatorPid), both: () => idleRss(appPid) + idleRss(facilitatorPid) }, 200)
    const idleKb = idleRss(appPid) + idleRss(facilitatorPid)
    const jobs = paywallJobs(await sign(warmup + requests), round * 100_000)
    const result = await measure(infra, {
      target: "official",
      concurrency,
      origin: stack.origin,
      path: "/execute",
      warmup: jobs.slice(0, warmup),
      jobs: jobs.slice(warmup),
      check: checkEcho,
      serverPid: appPid,
      extraPids: { facilitator: facilitatorPid },
      sampler: { stop: () => rss.stop() },
      outputBytes: () => stack.app.outputBytes() + stack.facilitator.outputBytes(),
      rpcUrl: infra.rpcUrl
    })
    return { variant: "official", round, idleKb, result } satisfies OfficialPhase
  } finally {
    await stack.stop()
  }
}

/** The facilitator as shipped (`createSigner`: no nonce manager) at c=32: how many paid calls fail. */
const probeShippedSigner = async (infra: Infra, count: number) => {
  const stack = await startOfficial(infra, "official (createSigner) probe", "package")
  try {
    const run = await runClosedLoop({ origin: stack.origin, path: "/execute", jobs: paywallJobs(await sign(count), 900_000), concurrency: 32, check: checkEcho })
    const reasons = [...new Set(stack.facilitator.output().match(/settle: [^\n]*?Details: [^\n]+|Details: [^\n]+/g) ?? [])].slice(0, 3)
    log(`    createSigner as shipped, c=32: ${run.errors} of ${run.requests} paid calls failed (${reasons.join("; ") || "no reason logged"})`)
    return { requests: run.requests, errors: run.errors, sample: run.errorSamples[0]?.slice(0, 200) ?? "", reasons }
  } finally {
    await stack.stop()
  }
}

const main = async () => {
  installSignalHandlers()
  const started = Date.now()
  const machine = machineInfo()
  log(`bench:official: the marketplace against x402-express + the x402 facilitator (nproc ${machine.nproc}, load average ${machine.loadAverage.map((l) => l.toFixed(2)).join(" ")})`)
  const versions = ensureOfficialInstalled()
  log(`  official stack: x402-express ${versions.x402Express}, x402 ${versions.x402}, express ${versions.express}`)

  log("  starting anvil, PostgreSQL and the agent")
  const infra = await startInfra()
  const watchdog = new PoolWatchdog(infra.rpcUrl, 500, log)
  onCleanup("pool watchdog", async () => watchdog.stop())
  const receiver = await startWebhookReceiver()
  onCleanup("webhook receiver", () => receiver.close())

  log("  registering the agent through the marketplace")
  watchdog.label = "set-up"
  const setup = await startMarketplace(infra, { name: "marketplace (setup)" })
  const agentId = await registerAgent(infra, setup.origin)
  {
    const [smoke] = await sign(1)
    if (smoke === undefined) throw new BenchError("signing failed")
    const r = await postJson(`${setup.origin}/api/v1/execute`, { targetAgentId: agentId, capabilityId: "echo", input: input(0) }, { "x-payment": smoke.header })
    const problem = r.status === 200 ? checkExecution(r.body) : `HTTP ${r.status}`
    if (problem !== undefined) throw new BenchError(`the smoke execution failed (${problem}): ${r.text}`)
  }
  await setup.child.stop()
  // Every phase starts here: no webhook subscribed (the webhook phases subscribe one on their fresh service).
  const start = await ChainSnapshot.take(infra.rpcUrl, infra)

  const phases: Array<OfficialPhase> = []
  for (const level of SETTINGS.levels) {
    log(`  concurrency ${level.concurrency}: ${level.warmup} warm-up + ${level.requests} measured requests per phase, ${SETTINGS.rounds} rounds`)
    for (let round = 1; round <= SETTINGS.rounds; round++) {
      for (const variant of ["marketplace", "marketplace+webhook", "official"] as const) {
        watchdog.label = `${variant} c=${level.concurrency} #${round}`
        await start.restore()
        phases.push(
          variant === "official" ? await officialPhase(infra, level, round) : await marketplacePhase(infra, agentId, variant, level, round, receiver.url)
        )
      }
    }
  }
  let probe: OfficialReport["probe"]
  if (SETTINGS.probe > 0) {
    log(`  the facilitator with the package's own createSigner (no nonce manager), ${SETTINGS.probe} paid calls at c=32`)
    watchdog.label = "createSigner probe"
    await start.restore()
    probe = await probeShippedSigner(infra, SETTINGS.probe)
  }
  await start.restore()

  const output = PARAMS.output
  await writeOfficialSection(output, {
    date: new Date().toISOString(),
    durationSeconds: (Date.now() - started) / 1000,
    machine,
    versions,
    settings: SETTINGS,
    phases,
    webhookDeliveries: receiver.received(),
    poolRescues: watchdog.rescues.length,
    ...(probe === undefined ? {} : { probe })
  })
  log(`  wrote the official section of ${path.relative(ROOT, output)} (${((Date.now() - started) / 1000).toFixed(0)} s in all)`)
}

main()
  .then(async () => {
    await cleanupAll()
    process.exit(0)
  })
  .catch(async (error: unknown) => {
    console.error(`\nbench:official failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`)
    await cleanupAll()
    process.exit(1)
  })
