// Settlement-only bench (`npm run bench:settle`): how many payments per second the service settles on the devnet from
// one treasury, with the SettlementBatcher (group commit) and one transaction per payment. Payment authorizations are
// signed up front from dev accounts 1-9; each mode runs the service's own layers in this process on a fresh database,
// from the same chain snapshot, and settles through Payments.settle: the settler, the treasury writer (nonce row,
// signed bytes stored before broadcast), the receipt, the settlement machine and its ledger booking, one PostgreSQL
// transaction per payment. Rewrites its section of docs/performance.md (between the `bench:settle` markers).
//
// Settings (environment): BENCH_SETTLE_LEVELS ("1:100:recorded,32:1000:recorded,256:3000:recorded,256:3000:chain":
// in flight:payments:what per level; "chain" times Payments.settleOnChain alone and books afterwards),
// BENCH_SETTLE_BATCH_MAX (100), BENCH_SETTLE_MODES ("batcher,one by one"), BENCH_OUTPUT (docs/performance.md).
import { chmod, mkdtemp, rm } from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { startDevnet } from "../layers/devnet/anvil.js"
import { startEmbeddedPostgres } from "../layers/embeddedPostgres.js"
import { cleanupAll, installSignalHandlers, onCleanup } from "./lib/children.js"
import { machineInfo } from "./lib/machine.js"
import { BenchError, intEnv, log, ms, ROOT } from "./lib/params.js"
import { paymentRequests, signAll } from "./lib/payments.js"
import { postmasterPid, stopPostgres } from "./lib/servers.js"
import { type Level, type ModeResult, runMode } from "./lib/settleRun.js"
import { writeSection } from "./lib/sections.js"
import { renderSettleSection } from "./lib/settleReport.js"
import { adminQuery, blockNumber, rpcCall } from "./lib/snapshot.js"

const LEVELS: ReadonlyArray<Level> = (process.env["BENCH_SETTLE_LEVELS"] ?? "1:100:recorded,32:1000:recorded,256:3000:recorded,256:3000:chain")
  .split(",")
  .map((part) => {
    const [cText, nText, measure = "recorded"] = part.split(":")
    const c = Number(cText)
    const n = Number(nText)
    if (!Number.isInteger(c) || !Number.isInteger(n) || c < 1 || n < 1 || (measure !== "recorded" && measure !== "chain")) {
      throw new Error(`BENCH_SETTLE_LEVELS: "${part}" is not concurrency:payments[:recorded|chain]`)
    }
    return { concurrency: c, payments: n, measure }
  })
const BATCH_MAX = intEnv("BENCH_SETTLE_BATCH_MAX", 100)
const MODES = ([["batcher", BATCH_MAX], ["one by one", 1]] as const).filter(([name]) =>
  (process.env["BENCH_SETTLE_MODES"] ?? "batcher,one by one").split(",").map((m) => m.trim()).includes(name))
const WARMUP = 20
const OUTPUT = process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md")

const main = async () => {
  installSignalHandlers()
  const started = Date.now()
  const machine = machineInfo()
  log(`bench: settlement only (nproc ${machine.nproc}, load average ${machine.loadAverage.map((l) => l.toFixed(2)).join(" ")})`)

  const tmp = await mkdtemp(path.join(os.tmpdir(), "marketplace-settle-"))
  await chmod(tmp, 0o755) // the postgres system user must traverse it
  onCleanup("temp dir", () => rm(tmp, { recursive: true, force: true }))
  const pgDir = path.join(tmp, "pg")
  const [devnet, pg] = await Promise.all([
    startDevnet({ port: 0, compileCacheDir: "node_modules/.cache/test-usdc" }),
    startEmbeddedPostgres({ databaseDir: pgDir, persistent: false, database: "settle_admin" })
  ])
  onCleanup("anvil", () => devnet.stop())
  const pgPid = postmasterPid(pgDir)
  onCleanup("postgres", () => stopPostgres(pg, pgPid))
  const adminUrl = pg.url.replace(/\/[^/]+$/, "/postgres")
  log(`  anvil ${devnet.rpcUrl}, PostgreSQL :${pg.port}`)

  const total = WARMUP + LEVELS.reduce((sum, l) => sum + l.payments, 0)
  let t0 = performance.now()
  const signed = await signAll(paymentRequests(total, 1n))
  log(`  signed ${total} authorizations (payers: dev accounts 1-9, 1 micro-USDC each) in ${ms(performance.now() - t0)} ms`)
  const warmup = signed.slice(0, WARMUP)
  let offset = WARMUP
  const levels = LEVELS.map((level) => {
    const part = signed.slice(offset, offset + level.payments)
    offset += level.payments
    return { level, signed: part }
  })

  // Both modes start from this chain (the same authorizations are unused again after the revert) and a new database.
  let snapshot = await rpcCall(devnet.rpcUrl, "evm_snapshot")
  const startHeight = await blockNumber(devnet.rpcUrl)
  const modes: Array<ModeResult> = []
  for (const [name, batchMax] of MODES) {
    if ((await rpcCall(devnet.rpcUrl, "evm_revert", [snapshot])) !== true) throw new BenchError("evm_revert refused the snapshot")
    snapshot = await rpcCall(devnet.rpcUrl, "evm_snapshot")
    const database = `settle_${name.replace(/\W+/g, "_")}`
    await adminQuery(adminUrl, `CREATE DATABASE ${database}`)
    log(`  ${name} (SETTLEMENT_BATCH_MAX=${batchMax})`)
    t0 = performance.now()
    modes.push(await runMode({
      name,
      batchMax,
      rpcUrl: devnet.rpcUrl,
      databaseUrl: pg.url.replace(/\/[^/]+$/, `/${database}`),
      dataDir: path.join(tmp, `data-${database}`),
      pgDir,
      anvilPid: devnet.pid,
      warmup,
      levels
    }))
  }

  const section = renderSettleSection({
    date: new Date().toISOString(),
    durationSeconds: (Date.now() - started) / 1000,
    machine,
    loadAfter: os.loadavg(),
    startHeight,
    warmup: WARMUP,
    modes
  })
  await writeSection(OUTPUT, "settle", section)
  log(`  wrote ${path.relative(ROOT, OUTPUT)} (${((Date.now() - started) / 1000).toFixed(0)} s in all)`)
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
