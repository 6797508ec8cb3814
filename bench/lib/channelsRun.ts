// The phases of bench/channels.ts, each from the same chain snapshot and database: voucher-paid calls (the official
// batch-settlement client, one channel per worker, deposits before timing), our `exact` path (pre-signed x402 v1
// X-PAYMENT headers, as `npm run bench` sends them) and the official x402 `exact` stack (x402-express + the x402
// facilitator, bench/official); the chain on automine or mining a block every N seconds.
import { DEVNET_USDC_ADDRESS } from "../../layers/devnet/anvil.js"
import { channelCost, type ChannelCost, rangeCost, type RangeCost, waitForClaimsAndSettles } from "./chainCost.js"
import { channelWorkers, depositAll, runVoucherLoop } from "./channelLoad.js"
import { checkEcho, checkExecution, marketplaceJobs, paywallJobs, sign } from "./jobs.js"
import { type Job, mean, percentile, runClosedLoop, type RunResult } from "./load.js"
import { startOfficial } from "./official.js"
import { BenchError, log, ms } from "./params.js"
import { cpuMs, treeCpuMs } from "./proc.js"
import { type Infra, postmasterPid, servingPid, startMarketplace } from "./servers.js"
import { blockNumber, rpcCall } from "./snapshot.js"

/** "voucher, one request": the same client paying from the first 402 it saw, without wrapFetchWithPayment's probe per call. */
export type Variant = "voucher" | "voucher, one request" | "exact" | "official exact"

export interface Level {
  readonly concurrency: number
  readonly warmup: number
  readonly requests: number
}

export interface Mode {
  readonly name: string
  /** Seconds between blocks; undefined: automine (a block per transaction, at once). */
  readonly blockTime: number | undefined
}

export interface PhaseResult extends Level {
  readonly variant: Variant
  readonly mode: string
  readonly errors: number
  readonly errorSamples: ReadonlyArray<string>
  readonly wallMs: number
  readonly throughput: number
  readonly p50: number
  readonly p99: number
  readonly mean: number
  /** CPU ms per measured call: "service" (ours, or the official app + facilitator), "postgres", "anvil", "client". */
  readonly cpuMsPerCall: Readonly<Record<string, number>>
  /** Every transaction of the phase (deposits, warm-up, measured calls, and for channels the claims and settles after). */
  readonly chain: RangeCost
  /** The paid calls those transactions paid for (warm-up and deposits included). */
  readonly paidCalls: number
  readonly channels?: {
    readonly cost: ChannelCost
    /** How long the claims and settles took to be final after the last call, and whether they all were. */
    readonly settled: { readonly done: boolean; readonly waitedMs: number; readonly left: string }
    readonly sentTypes: Readonly<Record<string, number>>
    readonly httpRequestsPerCall: number
  }
}

/** automine, or a block every `blockTime` seconds, on the running anvil (no restart: the set-up state stays). */
export const setMining = async (rpcUrl: string, blockTime: number | undefined) => {
  if (blockTime === undefined) {
    await rpcCall(rpcUrl, "evm_setIntervalMining", [0])
    await rpcCall(rpcUrl, "evm_setAutomine", [true])
  } else {
    await rpcCall(rpcUrl, "evm_setAutomine", [false])
    await rpcCall(rpcUrl, "evm_setIntervalMining", [blockTime])
  }
}

const cpuOf = (infra: Infra, service: () => number) => {
  const pg = postmasterPid(infra.pgDir)
  const read = (): Record<string, number> => {
    const own = process.cpuUsage()
    return { service: service(), postgres: pg > 0 ? treeCpuMs(pg) : 0, anvil: cpuMs(infra.anvilPid), client: (own.user + own.system) / 1000 }
  }
  const before = read()
  return (calls: number): Record<string, number> =>
    Object.fromEntries(Object.entries(read()).map(([k, v]) => [k, (v - (before[k] ?? 0)) / Math.max(1, calls)]))
}

const summary = (variant: Variant, mode: Mode, level: Level, run: RunResult) => ({
  variant,
  mode: mode.name,
  ...level,
  errors: run.errors,
  errorSamples: run.errorSamples,
  wallMs: run.wallMs,
  throughput: (1000 * run.requests) / run.wallMs,
  p50: percentile(run.latenciesMs, 50),
  p99: percentile(run.latenciesMs, 99),
  mean: mean(run.latenciesMs)
})

const logged = (r: PhaseResult) => {
  log(
    `    ${r.variant.padEnd(14)} c=${String(r.concurrency).padStart(2)}: ${r.requests} calls (${r.errors} errors), ${r.throughput.toFixed(1)}/s, p50 ${ms(r.p50)} ms, ` +
      `p99 ${ms(r.p99)} ms, service CPU ${ms(r.cpuMsPerCall["service"] ?? 0)} ms/call; ${r.chain.transactions} transactions, ${r.chain.gasUsed} gas for ${r.paidCalls} paid calls` +
      (r.channels === undefined ? "" : `; claims ${r.channels.cost.byPurpose["channel_claim"]?.transactions ?? 0} covering ${r.channels.cost.claimedVouchers} vouchers` +
        ` (${r.channels.settled.done ? `final ${(r.channels.settled.waitedMs / 1000).toFixed(1)} s after the last call` : `not final: ${r.channels.settled.left}`})`)
  )
  if (r.errors > 0) log(r.errorSamples.map((s) => `      ${s}`).join("\n"))
  return r
}

/** Channel settings of the service under test (the same for every marketplace phase). */
export const channelEnv = (claimIntervalSeconds: number): Record<string, string> => ({ CHANNEL_CLAIM_INTERVAL_SECONDS: String(claimIntervalSeconds) })

export const voucherPhase = async (infra: Infra, agentId: string, mode: Mode, level: Level, claimIntervalSeconds: number, remember = false): Promise<PhaseResult> => {
  const variant: Variant = remember ? "voucher, one request" : "voucher"
  const server = await startMarketplace(infra, { name: `${variant} ${mode.name} c=${level.concurrency}`, env: channelEnv(claimIntervalSeconds) })
  try {
    const from = await blockNumber(infra.rpcUrl)
    const workers = channelWorkers({
      rpcUrl: infra.rpcUrl,
      usdc: DEVNET_USDC_ADDRESS,
      concurrency: level.concurrency,
      callsPerWorker: Math.ceil((level.warmup + level.requests) / level.concurrency) + 1,
      tag: `${variant} ${mode.name} c=${level.concurrency}`,
      remember
    })
    await depositAll(workers, server.origin, agentId)
    const warm = await runVoucherLoop(workers, server.origin, agentId, level.warmup)
    if (warm.errors > 0) throw new BenchError(`${variant} c=${level.concurrency} warm-up: ${warm.errors} errors:\n${warm.errorSamples.join("\n")}`)
    const requestsBefore = workers.httpRequests()
    const pid = servingPid(server)
    const cpu = cpuOf(infra, () => cpuMs(pid))
    const run = await runVoucherLoop(workers, server.origin, agentId, level.requests)
    const cpuMsPerCall = cpu(run.requests)
    const httpRequestsPerCall = (workers.httpRequests() - requestsBefore) / run.requests
    const settled = await waitForClaimsAndSettles(infra.databaseUrl, claimIntervalSeconds * 3_000 + 60_000)
    const chain = await rangeCost(infra.rpcUrl, from, await blockNumber(infra.rpcUrl))
    const cost = await channelCost(infra.databaseUrl, infra.rpcUrl)
    const paidCalls = level.concurrency + level.warmup + level.requests
    return logged({ ...summary(variant, mode, level, run), cpuMsPerCall, chain, paidCalls, channels: { cost, settled, sentTypes: workers.sentTypes(), httpRequestsPerCall } })
  } finally {
    await server.child.stop()
  }
}

/** A closed loop of pre-signed calls (warm-up, then measured) against a server, with the chain's cost of both. */
const presignedPhase = async (infra: Infra, o: {
  readonly variant: Variant
  readonly mode: Mode
  readonly level: Level
  readonly origin: string
  readonly path: string
  readonly jobs: ReadonlyArray<Job>
  readonly check: (body: unknown) => string | undefined
  readonly service: () => number
}): Promise<PhaseResult> => {
  const { level } = o
  const common = { origin: o.origin, path: o.path, concurrency: level.concurrency, timeoutMs: 120_000 }
  const from = await blockNumber(infra.rpcUrl)
  const warm = await runClosedLoop({ ...common, jobs: o.jobs.slice(0, level.warmup), check: o.check })
  if (warm.errors > 0) throw new BenchError(`${o.variant} c=${level.concurrency} warm-up: ${warm.errors} errors:\n${warm.errorSamples.join("\n")}`)
  const cpu = cpuOf(infra, o.service)
  const run = await runClosedLoop({ ...common, jobs: o.jobs.slice(level.warmup), check: o.check })
  const cpuMsPerCall = cpu(run.requests)
  // Both answer once the payment is settled on chain: the blocks up to now hold every transaction of the phase.
  const chain = await rangeCost(infra.rpcUrl, from, await blockNumber(infra.rpcUrl))
  return logged({ ...summary(o.variant, o.mode, level, run), cpuMsPerCall, chain, paidCalls: level.warmup + level.requests })
}

export const exactPhase = async (infra: Infra, agentId: string, mode: Mode, level: Level, claimIntervalSeconds: number, offset: number) => {
  const server = await startMarketplace(infra, { name: `exact ${mode.name} c=${level.concurrency}`, env: channelEnv(claimIntervalSeconds) })
  try {
    const pid = servingPid(server)
    const jobs = marketplaceJobs(agentId, await sign(level.warmup + level.requests), offset)
    return await presignedPhase(infra, { variant: "exact", mode, level, origin: server.origin, path: "/api/v1/execute", jobs, check: checkExecution, service: () => cpuMs(pid) })
  } finally {
    await server.child.stop()
  }
}

export const officialPhase = async (infra: Infra, mode: Mode, level: Level, offset: number) => {
  const stack = await startOfficial(infra, `official ${mode.name} c=${level.concurrency}`, "nonce-manager")
  try {
    const jobs = paywallJobs(await sign(level.warmup + level.requests), offset)
    const service = () => cpuMs(stack.app.pid) + cpuMs(stack.facilitator.pid)
    return await presignedPhase(infra, { variant: "official exact", mode, level, origin: stack.origin, path: "/execute", jobs, check: checkEcho, service })
  } finally {
    await stack.stop()
  }
}
