// One measured phase of the bench: warm-up, then the closed loop with CPU per process, peak memory and chain height.
import { type Job, mean, percentile, runClosedLoop } from "./load.js"
import { BenchError, log, ms } from "./params.js"
import { cpuMs, memoryKb, processTree, RssSampler, systemCpuMs, treeCpuMs, treePssKb } from "./proc.js"
import { type Infra, postmasterPid } from "./servers.js"
import { blockNumber } from "./snapshot.js"
import type { PhaseResult, TargetName } from "./types.js"

// ---------------------------------------------------------------------------------------------------------------
// one measured phase

export interface Sampler {
  /** Peak KiB per target; stops sampling. */
  readonly stop: () => Record<string, number>
}

export interface Measured {
  readonly target: TargetName
  readonly concurrency: number
  readonly origin: string
  readonly path: string
  readonly warmup: ReadonlyArray<Job>
  readonly jobs: ReadonlyArray<Job>
  readonly check: (body: unknown) => string | undefined
  /** The process whose memory and CPU are "the server's". */
  readonly serverPid: number
  /** Sampling of the server's RSS began before this phase (at spawn). */
  readonly sampler: Sampler
  readonly onMeasuredStart?: () => void
  /** Bytes the server has logged so far (its stdout + stderr), when it is our child. */
  readonly outputBytes?: () => number
  readonly rpcUrl: string
  /** The server is a primary with workers (WEB_CONCURRENCY > 1): CPU and memory of its whole process tree. */
  readonly serverTree?: boolean
  /** More processes of the target under test, by name (e.g. the official stack's facilitator): their CPU per request. */
  readonly extraPids?: Readonly<Record<string, number>>
}

const cpuGroups = (infra: Infra, serverPid: number, tree: boolean, extra: Readonly<Record<string, number>> = {}): Record<string, () => number> => {
  const pgPid = postmasterPid(infra.pgDir)
  // With BENCH_AGENT=inline the agent runs in this process: its CPU is part of "load generator".
  const groups: Record<string, () => number> = serverPid === process.pid ? {} : { server: () => (tree ? treeCpuMs(serverPid) : cpuMs(serverPid)) }
  for (const [name, pid] of Object.entries(extra)) groups[name] = () => cpuMs(pid)
  if (serverPid !== infra.agentPid && infra.agentPid !== process.pid) groups["agent"] = () => cpuMs(infra.agentPid)
  groups["postgres"] = () => (pgPid > 0 ? treeCpuMs(pgPid) : 0)
  groups["anvil"] = () => cpuMs(infra.anvilPid)
  groups["load generator"] = () => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
  return groups
}

export const measure = async (infra: Infra, m: Measured): Promise<PhaseResult> => {
  if (m.warmup.length > 0) {
    const warm = await runClosedLoop({ origin: m.origin, path: m.path, jobs: m.warmup, concurrency: m.concurrency, check: m.check })
    if (warm.errors > 0) {
      throw new BenchError(`${m.target} c=${m.concurrency}: ${warm.errors} errors during warm-up:\n${warm.errorSamples.join("\n")}`)
    }
  }
  const groups = cpuGroups(infra, m.serverPid, m.serverTree === true, m.extraPids)
  const heightBefore = await blockNumber(m.rpcUrl)
  const before = Object.fromEntries(Object.entries(groups).map(([k, read]) => [k, read()]))
  const serverSystemMs = () => (m.serverTree === true ? processTree(m.serverPid).reduce((sum, pid) => sum + systemCpuMs(pid), 0) : systemCpuMs(m.serverPid))
  const systemBefore = serverSystemMs()
  const logBefore = m.outputBytes?.() ?? 0
  m.onMeasuredStart?.()
  const run = await runClosedLoop({ origin: m.origin, path: m.path, jobs: m.jobs, concurrency: m.concurrency, check: m.check })
  const after = Object.fromEntries(Object.entries(groups).map(([k, read]) => [k, read()]))
  const systemAfter = serverSystemMs()
  const logAfter = m.outputBytes?.() ?? 0
  const heightAfter = await blockNumber(m.rpcUrl)
  const peaks = m.sampler.stop()
  if (run.errors > 0) {
    throw new BenchError(
      `${m.target} c=${m.concurrency}: ${run.errors} of ${run.requests} requests failed; the benchmark is invalid:\n${run.errorSamples.join("\n")}`
    )
  }
  const cpuPerRequest = Object.fromEntries(
    Object.keys(groups).map((k) => [k, ((after[k] ?? 0) - (before[k] ?? 0)) / run.requests])
  )
  const totalCpu = Object.values(cpuPerRequest).reduce((a, b) => a + b, 0) * run.requests
  const result: PhaseResult = {
    target: m.target,
    concurrency: m.concurrency,
    warmup: m.warmup.length,
    requests: run.requests,
    wallMs: run.wallMs,
    throughput: (1000 * run.requests) / run.wallMs,
    p50: percentile(run.latenciesMs, 50),
    p90: percentile(run.latenciesMs, 90),
    p99: percentile(run.latenciesMs, 99),
    mean: mean(run.latenciesMs),
    max: percentile(run.latenciesMs, 100),
    peakRssKb: peaks["server"] ?? 0,
    hwmKb: memoryKb(m.serverPid)?.hwm ?? 0,
    ...(peaks["postgres"] === undefined ? {} : { postgresPeakRssKb: peaks["postgres"] }),
    peakRssKbByProcess: peaks,
    cpuMsPerRequest: cpuPerRequest,
    serverSystemMsPerRequest: m.serverPid === process.pid ? 0 : (systemAfter - systemBefore) / run.requests,
    logBytesPerRequest: (logAfter - logBefore) / run.requests,
    blocks: { from: heightBefore, to: heightAfter },
    coresBusy: totalCpu / run.wallMs
  }
  log(
    `    ${m.target.padEnd(11)} c=${String(m.concurrency).padStart(2)}: ${result.throughput.toFixed(1)} req/s, p50 ${ms(result.p50)} ms, ` +
      `p99 ${ms(result.p99)} ms, peak RSS ${(result.peakRssKb / 1024).toFixed(0)} MiB, ` +
      `CPU/req ${Object.entries(cpuPerRequest).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ")} ms`
  )
  return result
}

/**
 * The server's RSS every 200 ms (cheap: /proc/<pid>/status); PostgreSQL's PSS only every 2 s, since reading
 * smaps_rollup of ~25 processes costs the bench process real CPU.
 */
export const samplerFor = (infra: Infra, serverPid: number, withPostgres: boolean, tree = false): Sampler => {
  const pgPid = postmasterPid(infra.pgDir)
  // Several processes: the sum of their RSS (each worker is a whole Node heap; little of it is shared).
  const rss = tree ? () => processTree(serverPid).reduce((sum, pid) => sum + (memoryKb(pid)?.rss ?? 0), 0) : () => memoryKb(serverPid)?.rss ?? 0
  const server = new RssSampler({ server: rss }, 200)
  const postgres = withPostgres ? new RssSampler({ postgres: () => (pgPid > 0 ? treePssKb(pgPid) : 0) }, 2_000) : undefined
  return { stop: () => ({ ...server.stop(), ...(postgres?.stop() ?? {}) }) }
}
