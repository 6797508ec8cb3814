// The bench:channels report (bench/lib/channelsReport.ts): per-1,000-call costs, vouchers per claim and the targets.
import { describe, expect, it } from "vitest"
import { type ChannelsReport, renderChannelsSection } from "../../bench/lib/channelsReport.js"
import type { PhaseResult, Variant } from "../../bench/lib/channelsRun.js"

const phase = (variant: Variant, mode: string, concurrency: number, x: { throughput: number; p50: number; claims?: number; vouchers?: number }): PhaseResult => ({
  variant,
  mode,
  concurrency,
  warmup: 0,
  requests: 100,
  errors: 0,
  errorSamples: [],
  wallMs: 1000,
  throughput: x.throughput,
  p50: x.p50,
  p99: x.p50 * 2,
  mean: x.p50,
  cpuMsPerCall: { service: 5 },
  chain: { from: 1, to: 3, transactions: 4, gasUsed: 400_000 },
  paidCalls: 200,
  ...(variant === "voucher"
    ? {
        channels: {
          cost: {
            byPurpose: { channel_deposit: { transactions: 1, gasUsed: 100_000 }, channel_claim: { transactions: x.claims ?? 1, gasUsed: 200_000 } },
            claimedVouchers: x.vouchers ?? 200,
            claimedChannels: concurrency
          },
          settled: { done: true, waitedMs: 1_500, left: "" },
          sentTypes: { voucher: 100 },
          httpRequestsPerCall: 2
        }
      }
    : {})
})

const report = (phases: ReadonlyArray<PhaseResult>): ChannelsReport => ({
  date: "2026-01-01T00:00:00.000Z",
  durationSeconds: 60,
  machine: { nproc: "2", cpuModel: "x", memoryGiB: 1, kernel: "k", node: "v20", loadAverage: [0, 0, 0], git: "abc" },
  loadAfter: [0, 0, 0],
  officialVersions: { express: "4", x402: "1.2.0", x402Express: "1.2.0" },
  claimIntervalSeconds: 60,
  levels: {},
  phases,
  failed: []
})

const line = (text: string, start: string) => text.split("\n").find((l) => l.startsWith(`| ${start}`)) ?? ""

describe("bench:channels report", () => {
  it("costs per 1,000 paid calls and vouchers per claim transaction, with the targets met or not", () => {
    const text = renderChannelsSection(report([
      phase("voucher", "automine", 32, { throughput: 150, p50: 100, claims: 2, vouchers: 300 }),
      phase("official exact", "automine", 32, { throughput: 120, p50: 200 }),
      phase("voucher", "2 s blocks", 1, { throughput: 40, p50: 30 }),
      phase("voucher", "2 s blocks", 32, { throughput: 100, p50: 300 }),
      phase("official exact", "2 s blocks", 32, { throughput: 10, p50: 3000 })
    ]))
    // 4 transactions and 400,000 gas for 200 paid calls.
    expect(line(text, "automine | official exact | 32")).toContain("| 20.0 | 2,000,000 |")
    expect(line(text, "automine | voucher | 32")).toContain("| 2.00 |") // HTTP requests per call
    expect(line(text, "automine | voucher | 32 | 200 | 1 (100,000 gas) | 2 (200,000 gas)")).toContain("**150**") // 300 vouchers over 2 claims
    expect(line(text, "2 s blocks: voucher-paid call, c=1 p50")).toContain("| 30.0 ms | yes |")
    expect(line(text, "2 s blocks: voucher-paid calls at c=32")).toContain("| 10.0× | yes |")
    expect(line(text, "automine: voucher-paid calls at c=32")).toContain("| 1.25× | **no** |")
    expect(line(text, "≥ 100 vouchers per claim")).toContain("| 150 | yes |")
  })

  it("says what was not measured instead of passing it", () => {
    const text = renderChannelsSection(report([phase("exact", "automine", 32, { throughput: 100, p50: 100 })]))
    expect(line(text, "2 s blocks: voucher-paid call, c=1 p50")).toContain("| not measured | not measured |")
    expect(line(text, "≥ 100 vouchers per claim")).toContain("not measured")
    expect(text).toContain("The official exact stack was not part of this run")
  })
})
