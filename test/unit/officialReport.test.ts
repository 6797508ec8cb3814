// The bench:official report (bench/lib/officialReport.ts): ratios over rounds and issue 29's verdicts.
import { describe, expect, it } from "vitest"
import { type OfficialPhase, renderOfficial, type Variant } from "../../bench/lib/officialReport.js"
import type { PhaseResult } from "../../bench/lib/types.js"

const phase = (variant: Variant, concurrency: number, round: number, x: { throughput: number; p50: number; p99: number; cpu: Record<string, number>; rssMiB: number }): OfficialPhase => {
  const result: PhaseResult = {
    target: variant === "official" ? "official" : "marketplace",
    concurrency,
    warmup: 0,
    requests: 100,
    wallMs: 1000,
    throughput: x.throughput,
    p50: x.p50,
    p90: x.p50,
    p99: x.p99,
    mean: x.p50,
    max: x.p99,
    peakRssKb: x.rssMiB * 1024,
    hwmKb: 0,
    peakRssKbByProcess: variant === "official" ? { facilitator: 150 * 1024 } : {},
    ...(variant === "official" ? {} : { postgresPeakRssKb: 100 * 1024 }),
    cpuMsPerRequest: x.cpu,
    serverSystemMsPerRequest: 0,
    logBytesPerRequest: 0,
    blocks: { from: 1, to: 2 },
    coresBusy: 1
  }
  return { variant, round, idleKb: 100 * 1024, result }
}

const report = (phases: ReadonlyArray<OfficialPhase>) =>
  renderOfficial({
    date: "2026-01-01T00:00:00.000Z",
    durationSeconds: 1,
    machine: { nproc: "2", cpuModel: "x", memoryGiB: 1, kernel: "k", node: "v20", loadAverage: [0, 0, 0], git: "abc" },
    versions: { express: "4", x402: "1.2.0", x402Express: "1.2.0" },
    settings: { rounds: 2, levels: [{ concurrency: 1, warmup: 0, requests: 100 }, { concurrency: 32, warmup: 0, requests: 100 }], probe: 0 },
    phases,
    webhookDeliveries: 0,
    poolRescues: 0
  })

const line = (text: string, start: string) => text.split("\n").find((l) => l.startsWith(`| ${start}`)) ?? ""

describe("bench:official report", () => {
  it("averages the rounds and marks each of issue 29's targets met or not", () => {
    const cpu = { server: 10, postgres: 5, agent: 1, anvil: 2 }
    const text = report([
      phase("marketplace", 32, 1, { throughput: 130, p50: 200, p99: 400, cpu, rssMiB: 200 }),
      phase("marketplace", 32, 2, { throughput: 110, p50: 200, p99: 400, cpu, rssMiB: 210 }),
      phase("marketplace+webhook", 32, 1, { throughput: 90, p50: 300, p99: 500, cpu: { ...cpu, postgres: 9 }, rssMiB: 260 }),
      phase("official", 32, 1, { throughput: 100, p50: 300, p99: 350, cpu: { server: 6, facilitator: 16, postgres: 4, agent: 1, anvil: 3 }, rssMiB: 150 }),
      phase("marketplace", 1, 1, { throughput: 40, p50: 20, p99: 40, cpu, rssMiB: 150 }),
      phase("official", 1, 1, { throughput: 35, p50: 25, p99: 28, cpu, rssMiB: 150 })
    ])
    expect(line(text, "c=32 throughput, marketplace (no webhook)")).toContain("1.20×")
    expect(line(text, "c=32 throughput, marketplace (no webhook)")).toContain("**met**")
    expect(line(text, "c=32 throughput, marketplace (`*` webhook")).toContain("**not met**")
    expect(line(text, "c=1 p50, marketplace (no webhook)")).toContain("**met**")
    expect(line(text, "c=1 p99, marketplace (no webhook)")).toContain("**not met**") // 40 > 28 + 10
    expect(line(text, "c=32 CPU per call, all processes, marketplace (no webhook)")).toContain("18.00 ms (official 26.00)") // PostgreSQL is not the official stack's
    expect(line(text, "c=32 CPU per call, PostgreSQL, marketplace (`*` webhook")).toContain("**not met**")
    expect(line(text, "c=32 peak RSS of the service, marketplace (no webhook)")).toContain("210 MiB")
    expect(line(text, "c=32 peak RSS of the service, marketplace (`*` webhook")).toContain("**not met**")
  })
})
