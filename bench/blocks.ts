// Block-time bench (`npm run bench:blocks`): paid-call latency and throughput of the service in production mode
// (CHAIN_RPC_URL, a fresh treasury key, a USDC token deployed for the run, the SettlementBatcher deployed by our deploy
// command) on an anvil with automine, with blocks every 2 s (Base-like) and every 12 s (Ethereum-like). Rewrites its
// section of docs/performance.md (between the `bench:blocks` markers) and prints a summary.
//
// Set-up once, on an automine anvil started with --dump-state: the chain (test/support/productionChain.ts's
// deployProductionChain), then the service registers the echo agent (paid, settled) and is stopped; the anvil's state
// and the database are the starting point of every run. Each run starts anvil from that state with its block time
// (`--block-time N`, or automine), the service on a copy of the database, and sends pre-signed paid calls
// (x402 v1 X-PAYMENT headers, as `npm run bench` sends them) at concurrency 1 and 32 in a closed loop.
//
// Settings (environment): BENCH_BLOCKS_MODES ("automine,2,12,12:1": block times in seconds; ":1" runs c=32 again with
// SETTLEMENT_BATCH_MAX=1, a transaction per payment, the control for batching), BENCH_BLOCKS_SCALE (1: a
// multiplier of the measured requests per level), BENCH_OUTPUT (docs/performance.md), BENCH_BLOCKS_RESULTS (a file to
// keep the results in as JSON), BENCH_BLOCKS_RENDER (such a file: render the section from it, run nothing).
import { existsSync } from "node:fs"
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import * as os from "node:os"
import * as path from "node:path"
import { spawnAnvil } from "../layers/devnet/process.js"
import { startEmbeddedPostgres } from "../layers/embeddedPostgres.js"
import { deployProductionChain } from "../test/support/productionChain.js"
import { type BlocksSetup, type BlockMode, type Level, type ModeResult, runMode, signPaidCalls, startProductionService } from "./lib/blocksRun.js"
import { type BlocksReport, renderBlocksSection, summaryLines } from "./lib/blocksReport.js"
import { cleanupAll, installSignalHandlers, onCleanup } from "./lib/children.js"
import { startEchoAgent } from "./lib/echo-agent.js"
import { registerAgent } from "./lib/jobs.js"
import { machineInfo } from "./lib/machine.js"
import { BenchError, log, PARAMS, ROOT } from "./lib/params.js"
import { writeSection } from "./lib/sections.js"
import { postmasterPid, stopPostgres } from "./lib/servers.js"

const OUTPUT = process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md")
const SCALE = (() => {
  const n = Number(process.env["BENCH_BLOCKS_SCALE"] ?? "1")
  if (!(n > 0 && n <= 100)) throw new Error("BENCH_BLOCKS_SCALE must be a number in (0, 100]")
  return n
})()

/** Requests per level, sized so that the three block times together stay under ~10 minutes on two cores. */
const levelsFor = (blockTime: number | undefined): ReadonlyArray<Level> => {
  const [c1, c32] = blockTime === undefined ? [100, 640] : blockTime <= 2 ? [20, 320] : [6, 128]
  const scaled = (n: number, min: number) => Math.max(min, Math.round(n * SCALE))
  return [
    { concurrency: 1, warmup: blockTime === undefined ? 10 : 1, requests: scaled(c1, 3) },
    { concurrency: 32, warmup: 32, requests: scaled(c32, 32) }
  ]
}

/** "automine", "N" (blocks every N s) or "N:1" (the same with SETTLEMENT_BATCH_MAX=1, at c=32 only: the control for batching). */
const MODES: ReadonlyArray<BlockMode> = (process.env["BENCH_BLOCKS_MODES"] ?? "automine,2,12,12:1").split(",").map((part) => {
  const text = part.trim()
  if (text === "automine") return { name: "automine", blockTime: undefined, levels: levelsFor(undefined) }
  const [secondsText, batchText] = text.split(":")
  const seconds = Number(secondsText)
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 60 || (batchText !== undefined && batchText !== "1")) {
    throw new Error(`BENCH_BLOCKS_MODES: "${text}" is not automine, a block time of 1-60 s, or such a block time with ":1"`)
  }
  if (batchText === undefined) return { name: `${seconds} s blocks`, blockTime: seconds, levels: levelsFor(seconds) }
  return { name: `${seconds} s blocks, one by one`, blockTime: seconds, batchMax: 1, levels: levelsFor(seconds).filter((l) => l.concurrency > 1) }
})

const PAYERS = 8

const publish = async (report: BlocksReport) => {
  await writeSection(OUTPUT, "blocks", renderBlocksSection(report))
  log(`  wrote ${path.relative(ROOT, OUTPUT)} (${report.durationSeconds.toFixed(0)} s in all)`)
  for (const line of summaryLines(report)) log(line)
}

const main = async () => {
  installSignalHandlers()
  const rendering = process.env["BENCH_BLOCKS_RENDER"]
  if (rendering !== undefined && rendering !== "") return publish(JSON.parse(await readFile(rendering, "utf8")) as BlocksReport)
  const started = Date.now()
  const machine = machineInfo()
  log(`bench: paid calls by block time (nproc ${machine.nproc}, load average ${machine.loadAverage.map((l) => l.toFixed(2)).join(" ")})`)

  const tmp = await mkdtemp(path.join(os.tmpdir(), "marketplace-blocks-"))
  await chmod(tmp, 0o755) // the postgres system user must traverse it
  onCleanup("temp dir", () => rm(tmp, { recursive: true, force: true }))
  const pgDir = path.join(tmp, "pg")
  const pg = await startEmbeddedPostgres({ databaseDir: pgDir, persistent: false, database: "blocks_setup" })
  const pgPid = postmasterPid(pgDir)
  onCleanup("postgres", () => stopPostgres(pg, pgPid))
  const adminUrl = pg.url.replace(/\/[^/]+$/, "/postgres")
  const agent = await startEchoAgent()
  onCleanup("agent", () => agent.close())
  const agentUrl = `http://127.0.0.1:${agent.port}/execute`

  log("  set-up on an automine anvil: USDC, payers, the batcher (deploy command), a fresh treasury key; the agent registered")
  const statePath = path.join(tmp, "chain-state.json")
  const setupAnvil = await spawnAnvil({ port: 0, dumpState: statePath })
  const unregisterSetupAnvil = onCleanup("anvil (set-up)", () => setupAnvil.stop())
  const chain = await deployProductionChain(setupAnvil.rpcUrl, { payers: PAYERS })
  const setup: BlocksSetup = {
    tmp,
    statePath,
    usdc: chain.usdc,
    batcher: chain.batcher,
    treasuryKey: chain.treasuryKey,
    treasury: chain.treasury,
    payers: chain.payers,
    agentUrl,
    templateUrl: pg.url,
    secrets: {
      PROXY_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      CLIENT_ID_SECRET: randomBytes(32).toString("hex"),
      WEBHOOK_SECRET_KEY: randomBytes(32).toString("hex"),
      CHAIN_TOKEN_SECRET: randomBytes(32).toString("hex")
    }
  }
  const service = await startProductionService(setup, "service (set-up)", setupAnvil.rpcUrl, pg.url)
  const [registration] = await signPaidCalls(setup, 1, PARAMS.registrationFee)
  if (registration === undefined) throw new BenchError("signing failed")
  const agentId = await registerAgent(setup, service.origin, registration)
  await service.child.stop()
  await setupAnvil.stop() // SIGTERM: anvil writes its state
  unregisterSetupAnvil()
  if (!existsSync(statePath)) throw new BenchError("anvil wrote no state file")
  log(`    token ${chain.usdc}, batcher ${chain.batcher}, treasury ${chain.treasury}, agent ${agentId} (tier premium)`)

  const modes: Array<ModeResult> = []
  for (const mode of MODES) {
    log(`  ${mode.name}: ${mode.levels.map((l) => `c=${l.concurrency} ${l.warmup} + ${l.requests}`).join(", ")}`)
    modes.push(await runMode(setup, mode, agentId, adminUrl))
  }

  const report: BlocksReport = { date: new Date().toISOString(), durationSeconds: (Date.now() - started) / 1000, machine, loadAfter: os.loadavg(), payers: PAYERS, modes }
  const keep = process.env["BENCH_BLOCKS_RESULTS"]
  if (keep !== undefined && keep !== "") await writeFile(keep, JSON.stringify(report, null, 2))
  await publish(report)
  const failed = modes.flatMap((m) => m.levels.filter((l) => l.errors > 0).map((l) => `${m.name} c=${l.concurrency}: ${l.errors} errors`))
  if (failed.length > 0) throw new BenchError(`paid calls failed (${failed.join("; ")}); the section was written with them`)
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
