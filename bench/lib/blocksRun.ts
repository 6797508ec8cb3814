// One block time of the block-time bench (bench/blocks.ts): an anvil started from the set-up chain's state with that
// block time (or automine), the service in production mode on a copy of the set-up database, paid calls at each
// concurrency with every answer tied to the block its settlement landed in, then the reconciliation.
import * as path from "node:path"
import type { Hex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { spawnAnvil } from "../../layers/devnet/process.js"
import { BlockWatch, blocksOf } from "./blockWatch.js"
import { baseEnv, onCleanup, spawnChild } from "./children.js"
import { checkExecution, marketplaceJobs } from "./jobs.js"
import { mean, percentile, runClosedLoop } from "./load.js"
import { at, BenchError, log, ms, PARAMS, PRICE } from "./params.js"
import { signAuthorization, type SignedPayment } from "./payments.js"
import { freePort } from "../../layers/embeddedPostgres.js"
import { waitHealthy } from "./servers.js"
import { adminQuery } from "./snapshot.js"

/** What every run shares: the set-up chain (token, batcher, treasury, payers), its saved state, the database server. */
export interface BlocksSetup {
  readonly tmp: string
  readonly statePath: string
  readonly usdc: Hex
  readonly batcher: Hex
  readonly treasuryKey: Hex
  readonly treasury: Hex
  readonly payers: ReadonlyArray<PrivateKeyAccount>
  readonly agentUrl: string
  /** The embedded PostgreSQL's URL of the template database (the set-up's, with the agent registered). */
  readonly templateUrl: string
  /** The service's secrets (the same for every run: the template database was written with them). */
  readonly secrets: Record<string, string>
}

export interface Level {
  readonly concurrency: number
  readonly warmup: number
  readonly requests: number
}

export interface BlockMode {
  readonly name: string
  /** Seconds between blocks; undefined: automine (a block per transaction). */
  readonly blockTime: number | undefined
  /** SETTLEMENT_BATCH_MAX for the service (undefined: its default, the batcher); 1 = a transaction per payment. */
  readonly batchMax?: number
  readonly levels: ReadonlyArray<Level>
}

export interface LevelResult extends Level {
  readonly errors: number
  readonly errorSamples: ReadonlyArray<string>
  readonly wallMs: number
  readonly throughput: number
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly mean: number
  readonly max: number
  /** From the request's send to the first sight of the block holding its settlement (an observer polling every 20 ms). */
  readonly mined: { readonly p50: number; readonly p95: number; readonly max: number }
  /** From that block's first sight to the answer: the service noticing the receipt, recording, answering. */
  readonly afterBlock: { readonly p50: number; readonly p95: number; readonly max: number }
  /** How many blocks after the last one seen at the send its settlement landed in: count per distance (1 = the next). */
  readonly blocksWaited: Readonly<Record<string, number>>
  /** Distinct settlement transactions and the blocks they landed in, for the measured requests. */
  readonly transactions: number
  readonly settlementBlocks: number
  /** Chain height before and after the measured requests. */
  readonly heights: { readonly from: number; readonly to: number }
}

export interface ModeResult {
  readonly name: string
  readonly blockTime: number | undefined
  readonly batchMax?: number
  readonly startMs: number
  readonly levels: ReadonlyArray<LevelResult>
  /** The reconciliation after the last level (micro-USDC), and /health's status then. */
  readonly reconciliation: { readonly drift: string; readonly inFlightIncoming: string; readonly inFlightOutgoing: string; readonly chainBalance: string }
  readonly health: string
}

/** Production mode as an operator runs it (`npm start`'s script, the bundle): CHAIN_RPC_URL, never DEVNET_RPC_URL. */
export const startProductionService = async (setup: BlocksSetup, name: string, rpcUrl: string, databaseUrl: string, extra: Record<string, string> = {}) => {
  const port = await freePort()
  const child = spawnChild(name, process.execPath, ["--max-old-space-size=256", "src/tools/start.mjs"], {
    env: {
      ...baseEnv(),
      ...setup.secrets,
      CHAIN_RPC_URL: rpcUrl,
      USDC_ADDRESS: setup.usdc,
      TREASURY_PRIVATE_KEY: setup.treasuryKey,
      SETTLEMENT_BATCHER_ADDRESS: setup.batcher,
      DATABASE_URL: databaseUrl,
      DATA_DIR: path.join(setup.tmp, "service-data"),
      HOST: "127.0.0.1",
      PORT: String(port),
      OPERATOR_TOKEN: PARAMS.operatorToken,
      ALLOW_PRIVATE_URLS: "true", // the agent listens on loopback
      RATE_LIMIT_AGENT_PER_WINDOW: "100000000",
      RATE_LIMIT_CLIENT_PER_WINDOW: "100000000",
      HEALTH_PROBE_INTERVAL_MS: "3600000",
      LOG_LEVEL: "warn",
      ...extra
    }
  })
  const origin = `http://127.0.0.1:${port}`
  await waitHealthy(origin, child)
  return { child, origin }
}

const operatorGet = async (origin: string, route: string) => {
  const response = await fetch(`${origin}${route}`, {
    headers: { authorization: `Bearer ${PARAMS.operatorToken}`, "x-operator": "bench" },
    signal: AbortSignal.timeout(30_000)
  })
  return { status: response.status, body: (await response.json()) as unknown }
}

/** `count` paid calls' X-PAYMENT headers: the payers round robin, to the treasury, for the run's token. */
export const signPaidCalls = async (setup: BlocksSetup, count: number, value: bigint = PRICE): Promise<Array<SignedPayment>> => {
  const now = BigInt(Math.floor(Date.now() / 1000))
  const out: Array<SignedPayment> = []
  for (let i = 0; i < count; i++) {
    const payer = setup.payers[i % setup.payers.length]
    if (payer === undefined) throw new BenchError("no payers")
    out.push(await signAuthorization(payer, { to: setup.treasury, value, validAfter: now - 600n, validBefore: now + 3600n, verifyingContract: setup.usdc }))
  }
  return out
}

const stats = (values: Float64Array) => ({ p50: percentile(values, 50), p95: percentile(values, 95), max: values.reduce((a, b) => Math.max(a, b), 0) })

export const runMode = async (setup: BlocksSetup, mode: BlockMode, agentId: string, adminUrl: string): Promise<ModeResult> => {
  const anvil = await spawnAnvil({ port: 0, loadState: setup.statePath, ...(mode.blockTime === undefined ? {} : { blockTime: mode.blockTime }) })
  const unregisterAnvil = onCleanup(`anvil (${mode.name})`, () => anvil.stop())
  const database = `blocks_${mode.name.replace(/\W+/g, "_")}`
  const template = new URL(setup.templateUrl).pathname.slice(1)
  await adminQuery(adminUrl, `CREATE DATABASE ${database} TEMPLATE ${template}`)
  const databaseUrl = setup.templateUrl.replace(/\/[^/]+$/, `/${database}`)
  const watch = BlockWatch.start(anvil.rpcUrl)
  const unregisterWatch = onCleanup(`block watch (${mode.name})`, () => watch.stop())
  try {
    let t0 = performance.now()
    const service = await startProductionService(setup, `service (${mode.name})`, anvil.rpcUrl, databaseUrl,
      mode.batchMax === undefined ? {} : { SETTLEMENT_BATCH_MAX: String(mode.batchMax) })
    const startMs = performance.now() - t0
    try {
      const levels: Array<LevelResult> = []
      let offset = 0
      for (const level of mode.levels) {
        const payments = await signPaidCalls(setup, level.warmup + level.requests)
        const jobs = marketplaceJobs(agentId, payments, offset)
        offset += jobs.length
        const common = { origin: service.origin, path: "/api/v1/execute", concurrency: level.concurrency, timeoutMs: 120_000 }
        const warm = await runClosedLoop({ ...common, jobs: jobs.slice(0, level.warmup), check: checkExecution })
        if (warm.errors > 0) throw new BenchError(`${mode.name} c=${level.concurrency} warm-up: ${warm.errors} errors:\n${warm.errorSamples.join("\n")}`)
        const answers: Array<{ readonly startedMs: number; readonly endedMs: number; readonly txHash: string }> = []
        const from = watch.height
        t0 = performance.now()
        const run = await runClosedLoop({
          ...common,
          jobs: jobs.slice(level.warmup),
          check: (body, answer) => {
            const problem = checkExecution(body)
            const txHash = at(body, "data", "settlement", "txHash")
            if (problem === undefined && typeof txHash === "string") answers.push({ startedMs: answer.startedMs, endedMs: answer.endedMs, txHash })
            return problem ?? (typeof txHash === "string" ? undefined : "no settlement txHash")
          }
        })
        const to = watch.height
        const blockOf = await blocksOf(anvil.rpcUrl, new Set(answers.map((a) => a.txHash)))
        const mined: Array<number> = []
        const after: Array<number> = []
        const waited: Record<string, number> = {}
        for (const a of answers) {
          const block = blockOf.get(a.txHash)
          const seen = block === undefined ? undefined : watch.seenAt(block)
          if (block === undefined || seen === undefined) continue
          mined.push(seen - a.startedMs)
          after.push(a.endedMs - seen)
          const distance = block - watch.heightAt(a.startedMs)
          waited[String(distance)] = (waited[String(distance)] ?? 0) + 1
        }
        const result: LevelResult = {
          ...level,
          errors: run.errors,
          errorSamples: run.errorSamples,
          wallMs: run.wallMs,
          throughput: (1000 * run.requests) / run.wallMs,
          p50: percentile(run.latenciesMs, 50),
          p95: percentile(run.latenciesMs, 95),
          p99: percentile(run.latenciesMs, 99),
          mean: mean(run.latenciesMs),
          max: run.latenciesMs.reduce((a, b) => Math.max(a, b), 0),
          mined: stats(Float64Array.from(mined)),
          afterBlock: stats(Float64Array.from(after)),
          blocksWaited: waited,
          transactions: blockOf.size,
          settlementBlocks: new Set(blockOf.values()).size,
          heights: { from, to }
        }
        levels.push(result)
        log(
          `    c=${level.concurrency}: ${level.requests} calls (${run.errors} errors) in ${(run.wallMs / 1000).toFixed(1)} s: ${result.throughput.toFixed(2)}/s, ` +
            `p50 ${ms(result.p50)} ms, p95 ${ms(result.p95)} ms, p99 ${ms(result.p99)} ms; on chain p50 ${ms(result.mined.p50)} ms, ` +
            `answered p50 ${ms(result.afterBlock.p50)} ms after the block; ${result.transactions} settlement transactions in ${result.settlementBlocks} blocks; ` +
            `blocks waited ${JSON.stringify(waited)}`
        )
        if (run.errors > 0) log(`      errors:\n${run.errorSamples.map((s) => `      ${s}`).join("\n")}`)
      }
      const rec = await operatorGet(service.origin, "/api/v1/operator/treasury/reconciliation")
      const current = at(rec.body, "data", "current")
      const field = (k: string) => String(at(current, k) ?? "?")
      const health = await fetch(`${service.origin}/health`, { signal: AbortSignal.timeout(10_000) })
        .then(async (r) => String(at(await r.json(), "data", "status") ?? r.status))
        .catch((e: unknown) => `unreachable (${String(e)})`)
      return {
        name: mode.name,
        blockTime: mode.blockTime,
        ...(mode.batchMax === undefined ? {} : { batchMax: mode.batchMax }),
        startMs,
        levels,
        reconciliation: { drift: field("drift"), inFlightIncoming: field("inFlightIncoming"), inFlightOutgoing: field("inFlightOutgoing"), chainBalance: field("chainBalance") },
        health
      }
    } finally {
      await service.child.stop()
    }
  } finally {
    await watch.stop()
    unregisterWatch()
    await anvil.stop()
    unregisterAnvil()
  }
}
