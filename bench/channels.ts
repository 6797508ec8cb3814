// Channel bench (`npm run bench:channels`): voucher-paid calls (the official batch-settlement client, one channel per
// concurrent worker, deposits before timing) side by side with our `exact` path and the official x402 `exact` stack, on
// automine and at 2 s blocks: c=1 p50 and p99, c=32 throughput, transactions and gas per 1,000 calls, vouchers per
// claim transaction. Writes its section of docs/performance.md (between the `bench:channels` markers).
//
// Set-up once per block time on a bench devnet of its own (startInfra: anvil with x402's channel contracts placed,
// PostgreSQL, the echo agent): the service registers the agent (paid, settled) and stops; a chain snapshot and a copy of
// the database are the start of every phase of that block time (evm_setAutomine / evm_setIntervalMining).
//
// Settings (environment): BENCH_CHANNELS_MODES ("automine,2": automine and/or block times in seconds),
// BENCH_CHANNELS_VARIANTS ("voucher,voucher-direct,exact,official"; voucher-direct: the same client paying from the
// first 402 it saw, one request per call), BENCH_CHANNELS_SCALE (1: a multiplier of the calls per level),
// BENCH_CHANNELS_CLAIM_INTERVAL (60, the default: the service's CHANNEL_CLAIM_INTERVAL_SECONDS), BENCH_OUTPUT (docs/performance.md),
// BENCH_CHANNELS_RESULTS (a file to keep the results in as JSON), BENCH_CHANNELS_RENDER (such a file: render, run nothing).
import { readFile, writeFile } from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { cleanupAll, installSignalHandlers } from "./lib/children.js"
import { type ChannelsReport, type FailedPhase, renderChannelsSection, summaryLines } from "./lib/channelsReport.js"
import { exactPhase, type Level, type Mode, officialPhase, type PhaseResult, setMining, type Variant, voucherPhase } from "./lib/channelsRun.js"
import { registerAgent } from "./lib/jobs.js"
import { machineInfo } from "./lib/machine.js"
import { ensureOfficialInstalled } from "./lib/official.js"
import { BenchError, intEnv, log, ROOT } from "./lib/params.js"
import { writeSection } from "./lib/sections.js"
import { startInfra, startMarketplace } from "./lib/servers.js"
import { ChainSnapshot } from "./lib/snapshot.js"

const OUTPUT = process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md")
const SCALE = (() => {
  const n = Number(process.env["BENCH_CHANNELS_SCALE"] ?? "1")
  if (!(n > 0 && n <= 100)) throw new Error("BENCH_CHANNELS_SCALE must be a number in (0, 100]")
  return n
})()
// The service's default schedule: vouchers per claim as production sees them.
const CLAIM_INTERVAL = intEnv("BENCH_CHANNELS_CLAIM_INTERVAL", 60)

const MODES: ReadonlyArray<Mode> = (process.env["BENCH_CHANNELS_MODES"] ?? "automine,2").split(",").map((part) => {
  const text = part.trim()
  if (text === "automine") return { name: "automine", blockTime: undefined }
  const seconds = Number(text)
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 60) throw new Error(`BENCH_CHANNELS_MODES: "${text}" is not automine or a block time of 1-60 s`)
  return { name: `${seconds} s blocks`, blockTime: seconds }
})

const VARIANTS: ReadonlyArray<Variant> = (process.env["BENCH_CHANNELS_VARIANTS"] ?? "voucher,voucher-direct,exact,official").split(",").map((part) => {
  const text = part.trim()
  if (text === "voucher" || text === "exact") return text
  if (text === "voucher-direct") return "voucher, one request"
  if (text === "official") return "official exact"
  throw new Error(`BENCH_CHANNELS_VARIANTS: "${text}" is not voucher, voucher-direct, exact or official`)
})

/**
 * Calls per level. Voucher-paid calls wait for no block, so they get as many on every chain; the `exact` paths wait for
 * their settlement's block, so at block times they get fewer (sized like bench/blocks.ts).
 */
const levelsFor = (variant: Variant, mode: Mode): ReadonlyArray<Level> => {
  const scaled = (n: number, min: number) => Math.max(min, Math.round(n * SCALE))
  const byVoucher = variant === "voucher" || variant === "voucher, one request"
  const [c1, c32] = byVoucher ? [200, 1600] : mode.blockTime === undefined ? [100, 640] : [20, 320]
  return [
    { concurrency: 1, warmup: byVoucher ? 5 : mode.blockTime === undefined ? 10 : 1, requests: scaled(c1, 3) },
    { concurrency: 32, warmup: 32, requests: scaled(c32, 32) }
  ]
}

const publish = async (report: ChannelsReport) => {
  await writeSection(OUTPUT, "channels", renderChannelsSection(report))
  log(`  wrote ${path.relative(ROOT, OUTPUT)} (${report.durationSeconds.toFixed(0)} s in all)`)
  for (const line of summaryLines(report)) log(line)
}

const main = async () => {
  installSignalHandlers()
  const rendering = process.env["BENCH_CHANNELS_RENDER"]
  if (rendering !== undefined && rendering !== "") return publish(JSON.parse(await readFile(rendering, "utf8")) as ChannelsReport)
  const started = Date.now()
  const machine = machineInfo()
  log(`bench:channels: voucher-paid calls against exact (nproc ${machine.nproc}, load average ${machine.loadAverage.map((l) => l.toFixed(2)).join(" ")})`)
  // bench/official's own install (npm ci, ~700 MB, once) only when the official stack is among the variants.
  const officialVersions = VARIANTS.includes("official exact") ? ensureOfficialInstalled() : { express: "–", x402: "–", x402Express: "–" }

  const phases: Array<PhaseResult> = []
  const failed: Array<FailedPhase> = []
  const levels: Record<string, ReadonlyArray<Level>> = {}
  let offset = 0
  for (const mode of MODES) {
    // A chain of its own per block time: thousands of automined blocks (each a second after the one before) leave the
    // node's clock ahead, and the 2 s-block `exact` phases' settlements then failed on the reused chain.
    log(`  ${mode.name}: starting anvil (with the channel contracts), PostgreSQL and the agent; registering the agent`)
    const infra = await startInfra()
    const setup = await startMarketplace(infra, { name: "marketplace (set-up)" })
    const agentId = await registerAgent(infra, setup.origin)
    await setup.child.stop()
    const start = await ChainSnapshot.take(infra.rpcUrl, infra)
    for (const variant of VARIANTS) levels[`${mode.name} ${variant}`] = levelsFor(variant, mode)
    for (const c of [1, 32]) {
      for (const variant of VARIANTS) {
        const level = levelsFor(variant, mode).find((l) => l.concurrency === c)
        if (level === undefined) continue
        await start.restore()
        await setMining(infra.rpcUrl, mode.blockTime)
        offset += 100_000
        try {
          phases.push(
            variant === "voucher" || variant === "voucher, one request"
              ? await voucherPhase(infra, agentId, mode, level, CLAIM_INTERVAL, variant === "voucher, one request")
              : variant === "exact" ? await exactPhase(infra, agentId, mode, level, CLAIM_INTERVAL, offset)
              : await officialPhase(infra, mode, level, offset)
          )
        } catch (error) {
          const failure = error instanceof Error ? error.message : String(error)
          log(`    ${variant} c=${c} failed: ${failure.slice(0, 2_000)}`)
          failed.push({ variant, mode: mode.name, concurrency: c, failure })
        } finally {
          await setMining(infra.rpcUrl, undefined)
        }
      }
    }
    await cleanupAll()
  }

  const report: ChannelsReport = {
    date: new Date().toISOString(),
    durationSeconds: (Date.now() - started) / 1000,
    machine,
    loadAfter: os.loadavg(),
    officialVersions,
    claimIntervalSeconds: CLAIM_INTERVAL,
    levels,
    phases,
    failed
  }
  const keep = process.env["BENCH_CHANNELS_RESULTS"]
  if (keep !== undefined && keep !== "") await writeFile(keep, JSON.stringify(report, null, 2))
  await publish(report)
  const errors = phases.filter((p) => p.errors > 0).map((p) => `${p.mode} ${p.variant} c=${p.concurrency}: ${p.errors} errors`)
  if (failed.length > 0 || errors.length > 0) {
    throw new BenchError(`${failed.length} phases failed, ${errors.length} had errors (${errors.join("; ")}); the section was written with them`)
  }
}

main()
  .then(async () => {
    await cleanupAll()
    process.exit(0)
  })
  .catch(async (error: unknown) => {
    console.error(`\nbench:channels failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`)
    await cleanupAll()
    process.exit(1)
  })
