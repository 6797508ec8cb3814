// The "Channels" section of docs/performance.md (bench/channels.ts), rendered from its results: every phase side by
// side, what the channels cost on chain, and the targets.
import type { machineInfo } from "./machine.js"
import type { Level, PhaseResult, Variant } from "./channelsRun.js"

export interface FailedPhase {
  readonly variant: Variant
  readonly mode: string
  readonly concurrency: number
  readonly failure: string
}

export interface ChannelsReport {
  readonly date: string
  readonly durationSeconds: number
  readonly machine: ReturnType<typeof machineInfo>
  readonly loadAfter: ReadonlyArray<number>
  readonly officialVersions: { readonly express: string; readonly x402: string; readonly x402Express: string }
  readonly claimIntervalSeconds: number
  readonly levels: Readonly<Record<string, ReadonlyArray<Level>>>
  readonly phases: ReadonlyArray<PhaseResult>
  readonly failed: ReadonlyArray<FailedPhase>
}

const t = (n: number) => (Number.isNaN(n) ? "–" : n >= 100 ? n.toFixed(0) : n.toFixed(1))
const r = (n: number) => (!Number.isFinite(n) ? "–" : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))
const thousands = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "–")
const load = (l: ReadonlyArray<number>) => l.map((x) => x.toFixed(2)).join(", ")
const per1000 = (n: number, calls: number) => (1000 * n) / Math.max(1, calls)

const find = (report: ChannelsReport, variant: Variant, mode: string, c: number) =>
  report.phases.find((p) => p.variant === variant && p.mode === mode && p.concurrency === c)

export const vouchersPerClaim = (p: PhaseResult) => {
  const claims = p.channels?.cost.byPurpose["channel_claim"]?.transactions ?? 0
  return claims === 0 ? Number.NaN : (p.channels?.cost.claimedVouchers ?? 0) / claims
}

const row = (p: PhaseResult) =>
  `| ${p.mode} | ${p.variant} | ${p.concurrency} | ${p.requests} | **${r(p.throughput)}** | **${t(p.p50)}** | ${t(p.p99)} | ${t(p.cpuMsPerCall["service"] ?? Number.NaN)} | ` +
  `${t(p.cpuMsPerCall["postgres"] ?? Number.NaN)} | ${t(p.cpuMsPerCall["client"] ?? Number.NaN)} | ` +
  `${p.channels === undefined ? "1" : r(p.channels.httpRequestsPerCall)} | ${r(per1000(p.chain.transactions, p.paidCalls))} | ${thousands(per1000(p.chain.gasUsed, p.paidCalls))} | ${p.errors} |`

const channelRow = (p: PhaseResult) => {
  const c = p.channels
  if (c === undefined) return ""
  const of = (purpose: string) => {
    const x = c.cost.byPurpose[purpose]
    return x === undefined ? "0" : `${x.transactions} (${thousands(x.gasUsed)} gas)`
  }
  const claims = c.cost.byPurpose["channel_claim"]?.transactions ?? 0
  return `| ${p.mode} | ${p.variant} | ${p.concurrency} | ${p.paidCalls} | ${of("channel_deposit")} | ${of("channel_claim")} | ${of("channel_settle")} | ` +
    `**${r(vouchersPerClaim(p))}** | ${claims === 0 ? "–" : r(c.cost.claimedChannels / claims)} | ${c.settled.done ? `${(c.settled.waitedMs / 1000).toFixed(1)} s` : `not within the wait: ${c.settled.left}`} |`
}

interface Target {
  readonly name: string
  readonly measured: string
  readonly met: boolean | undefined
}

const targets = (report: ChannelsReport): ReadonlyArray<Target> => {
  const ratio = (mode: string) => {
    const v = find(report, "voucher", mode, 32)
    const o = find(report, "official exact", mode, 32)
    return v === undefined || o === undefined ? Number.NaN : v.throughput / o.throughput
  }
  const c1 = find(report, "voucher", "2 s blocks", 1)
  const two = ratio("2 s blocks")
  const auto = ratio("automine")
  const claims = report.phases.filter((p) => p.variant === "voucher").map(vouchersPerClaim)
  const fewest = claims.length === 0 ? Number.NaN : Math.min(...claims)
  const met = (n: number, ok: boolean) => (Number.isNaN(n) ? undefined : ok)
  return [
    { name: "2 s blocks: voucher-paid call, c=1 p50 ≤ 50 ms", measured: c1 === undefined ? "not measured" : `${t(c1.p50)} ms`, met: c1 === undefined ? undefined : c1.p50 <= 50 },
    { name: "2 s blocks: voucher-paid calls at c=32 ≥ 8× the official exact stack's throughput", measured: `${r(two)}×`, met: met(two, two >= 8) },
    { name: "automine: voucher-paid calls at c=32 ≥ 1.5× the official exact stack's throughput", measured: `${r(auto)}×`, met: met(auto, auto >= 1.5) },
    { name: "≥ 100 vouchers per claim transaction (the fewest of the channel phases)", measured: r(fewest), met: met(fewest, fewest >= 100) }
  ]
}

export const renderChannelsSection = (report: ChannelsReport): string => {
  const lines: Array<string> = []
  lines.push("## Channels: voucher-paid calls against `exact` (bench/channels.ts)")
  lines.push("")
  lines.push(
    `\`npm run bench:channels\`, ${report.date} (${(report.durationSeconds / 60).toFixed(1)} min in all); ${report.machine.nproc} cores (${report.machine.cpuModel}), ` +
      `Node ${report.machine.node}, code ${report.machine.git}; load average ${load(report.machine.loadAverage)} before, ${load(report.loadAfter)} after.`
  )
  lines.push("")
  lines.push(
    "One chain (a new one per block time), and one snapshot of it and of the database for every phase; phases one after the other, each with its own fresh service. **voucher**: the unmodified official " +
      "batch-settlement client (`@x402/fetch` `wrapFetchWithPayment` + `@x402/evm`'s `BatchSettlementEvmScheme`), one channel per concurrent worker, " +
      "every worker's deposit made before timing; each call is the client's unpaid request, our 402, and the voucher-paid retry (the HTTP requests per " +
      "call column). **voucher, one request**: the same client paying from the first 402 it saw (its x402HTTPClient, as " +
      "the wrapper does after its probe), one request per call. **exact**: our `exact` path with pre-signed x402 v1 `X-PAYMENT` headers (settled through the SettlementBatcher before the answer). " +
      `**official exact**: x402-express ${report.officialVersions.x402Express} with the x402 ${report.officialVersions.x402} facilitator (nonce manager) in ` +
      "front of the same echo agent. Blocks: anvil on automine, or mining a block every 2 s (`evm_setIntervalMining`). " +
      `Claims every ${report.claimIntervalSeconds} s (\`CHANNEL_CLAIM_INTERVAL_SECONDS\`); a channel phase ends once every charge is claimed and settled.`
  )
  lines.push("")
  lines.push(
    "The client runs on the same two cores: the voucher client signs each voucher inside the measured window (client " +
      "CPU), while the `exact` calls' authorizations are signed before it. " +
      "Transactions and gas per 1,000 calls count every transaction of the phase (for channels: the deposits, the claims and the settles after the " +
      "last call) over every call it paid for, warm-up and deposit calls included."
  )
  lines.push("")
  lines.push("| blocks | payment | c | measured calls | calls/s | p50 ms | p99 ms | service CPU ms/call | PostgreSQL CPU ms/call | client CPU ms/call | HTTP requests/call | transactions / 1,000 calls | gas / 1,000 calls | errors |")
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
  for (const p of report.phases) lines.push(row(p))
  lines.push("")
  const channelPhases = report.phases.filter((p) => p.channels !== undefined)
  if (channelPhases.length > 0) {
    lines.push("Channels on chain (the treasury's `channel_*` transactions, confirmed, with their receipts' gas):")
    lines.push("")
    lines.push("| blocks | payment | c | paid calls | deposits | claims | settles | vouchers per claim | channels per claim | final after the last call |")
    lines.push("|---|---|---|---|---|---|---|---|---|---|")
    for (const p of channelPhases) lines.push(channelRow(p))
    lines.push("")
  }
  if (report.failed.length > 0) {
    lines.push("Phases that did not complete:")
    lines.push("")
    for (const f of report.failed) lines.push(`- ${f.mode}, ${f.variant}, c=${f.concurrency}: ${f.failure.replace(/\s+/g, " ").slice(0, 300)}`)
    lines.push("")
  }
  if (!report.phases.some((p) => p.variant === "official exact") && !report.failed.some((f) => f.variant === "official exact")) {
    lines.push("The official exact stack was not part of this run (`BENCH_CHANNELS_VARIANTS`): the targets set against it are not measured here.")
    lines.push("")
  }
  lines.push("| target | measured | met |")
  lines.push("|---|---|---|")
  for (const target of targets(report)) lines.push(`| ${target.name} | ${target.measured} | ${target.met === undefined ? "not measured" : target.met ? "yes" : "**no**"} |`)
  lines.push("")
  lines.push(
    `Calls per phase: ${Object.entries(report.levels).map(([k, ls]) => `${k} ${ls.map((l) => `c=${l.concurrency} ${l.warmup} + ${l.requests}`).join(", ")}`).join("; ")}.`
  )
  return lines.join("\n")
}

export const summaryLines = (report: ChannelsReport): ReadonlyArray<string> =>
  targets(report).map((target) => `  ${target.met === undefined ? "–" : target.met ? "met" : "NOT met"}: ${target.name}: ${target.measured}`)
