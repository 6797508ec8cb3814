// Result shapes of the benchmark (bench/execute.ts) that the report (bench/lib/report.ts) renders.
import type { Rescue } from "./pool-watchdog.js"
import type { ProfileSummary } from "./profile.js"

export type TargetName = "direct" | "paywall" | "marketplace" | "official"

export interface PhaseResult {
  readonly target: TargetName
  readonly concurrency: number
  readonly warmup: number
  readonly requests: number
  readonly wallMs: number
  /** Measured requests per second of wall time. */
  readonly throughput: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly mean: number
  readonly max: number
  /** Peak RSS (KiB) of the server under test, sampled every 200 ms from its start to the end of the phase. */
  readonly peakRssKb: number
  /** The kernel's high-water mark (VmHWM) of the same process at the end of the phase. */
  readonly hwmKb: number
  /** Peak RSS (KiB) of every process the sampler watched, by its name there ("server", "postgres", "facilitator"...). */
  readonly peakRssKbByProcess?: Readonly<Record<string, number>>
  /** Marketplace only: peak RSS of all PostgreSQL processes. */
  readonly postgresPeakRssKb?: number
  /** CPU time (ms) per measured request, by process group. */
  readonly cpuMsPerRequest: Record<string, number>
  /** Kernel-mode part of the server's CPU per request (ms). */
  readonly serverSystemMsPerRequest: number
  /** Bytes the server wrote to stdout/stderr per measured request (logging). */
  readonly logBytesPerRequest: number
  /** Chain height before and after the measured requests (each phase starts from the same snapshot). */
  readonly blocks: { readonly from: number; readonly to: number }
  /** All CPU time of the groups over the wall time (2 = both cores busy). */
  readonly coresBusy: number
  /** Paywall only: mean ms per request of its steps. */
  readonly paywallSteps?: { readonly count: number; readonly verify: number; readonly settle: number; readonly forward: number; readonly total: number }
}

export interface SettlementResult {
  readonly blocks: { readonly from: number; readonly to: number }
  readonly anvilCpuMsPerTx: number
  /** viem waits that timed out (20 s) although the receipt was there when read directly. */
  readonly stalledWaits: number
  readonly sequential: { readonly count: number; readonly submitP50: number; readonly receiptP50: number }
  readonly settled: { readonly count: number; readonly inFlight: number; readonly perSecond: number }
  readonly submitted: { readonly count: number; readonly inFlight: number; readonly perSecond: number }
}

export interface CounterRow {
  readonly name: string
  readonly perRequest: number
  readonly meanMs: number
}

export interface RpcSummary {
  readonly calls: number
  readonly waitMs: number
  readonly byMethod: ReadonlyArray<CounterRow>
}

export interface PgSummary {
  readonly roundTrips: number
  readonly statements: number
  readonly transactions: number
  readonly waitMs: number
  readonly top: ReadonlyArray<CounterRow>
}

export interface DiagnosticsResult {
  readonly roundTrips: {
    readonly requests: number
    readonly paywall: { readonly p50: number; readonly rpc: RpcSummary }
    readonly marketplace: { readonly p50: number; readonly rpc: RpcSummary; readonly pg: PgSummary }
  }
  readonly profiles: {
    readonly concurrency: number
    readonly requests: number
    readonly paywall: ProfileSummary
    readonly marketplace: ProfileSummary
  }
}

export interface BenchReport {
  readonly date: string
  readonly durationSeconds: number
  readonly machine: {
    readonly nproc: string
    readonly cpuModel: string
    readonly memoryGiB: number
    readonly kernel: string
    readonly node: string
    readonly loadAverage: ReadonlyArray<number>
    readonly git: string
  }
  readonly params: {
    readonly levels: ReadonlyArray<{ readonly concurrency: number; readonly warmup: number; readonly requests: number }>
    readonly agentMode: "child" | "inline"
    /** The marketplace phase's WEB_CONCURRENCY (absent in reports from before it existed: 1). */
    readonly webConcurrency?: number
    readonly price: string
    readonly settlementProbe: { readonly sequential: number; readonly concurrent: number; readonly inFlight: number }
    readonly diagnostics: { readonly roundTripRequests: number; readonly profileWarmup: number; readonly profileRequests: number; readonly profileConcurrency: number }
  }
  readonly phases: ReadonlyArray<PhaseResult>
  readonly settlement: {
    /** On the fresh chain (token deployed, accounts funded). */
    readonly fresh: SettlementResult
    /** On the chain as the last phase left it. */
    readonly grown: SettlementResult | undefined
    /** Height of the snapshot every paid phase starts from. */
    readonly startHeight: number
  }
  /** anvil pool stalls the watchdog had to clear (bench/lib/pool-watchdog.ts). */
  readonly poolRescues: ReadonlyArray<Rescue>
  readonly targets: {
    readonly throughput: { readonly concurrency: number; readonly ratio: number; readonly goal: number; readonly met: boolean }
    readonly latency: { readonly concurrency: number; readonly addedP50Ms: number; readonly goalMs: number; readonly met: boolean }
    readonly memory: { readonly concurrency: number; readonly peakMiB: number; readonly goalMiB: number; readonly met: boolean }
  }
  readonly diagnostics?: DiagnosticsResult
}
