// `npm run bench:hosts`: paid-call throughput of one instance against two instances of the service on one PostgreSQL
// and one chain, each behind the same plain round-robin balancer (bench/chaos/cluster.ts), closed loop at c=32 with
// pre-signed x402 v1 payments. Phases alternate (one host, two hosts, repeated) so that drift hits both. Writes its
// section of docs/performance.md (between the `bench:hosts` markers). On a machine with fewer cores than the processes
// it runs (two instances, PostgreSQL, anvil, the balancer and the client), it measures the machine as much as the service.
import * as os from "node:os"
import * as path from "node:path"
import { balancer, startCluster } from "./chaos/cluster.js"
import { PAYERS } from "./chaos/load.js"
import { cleanupAll, installSignalHandlers } from "./lib/children.js"
import { registerAgent } from "./lib/jobs.js"
import { type Job, mean, percentile, runClosedLoop } from "./lib/load.js"
import { machineInfo } from "./lib/machine.js"
import { paymentRequests, signAll } from "./lib/payments.js"
import { at, BenchError, intEnv, log, ms, PRICE, ROOT } from "./lib/params.js"
import { writeSection } from "./lib/sections.js"

const OUTPUT = process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md")
const CONCURRENCY = intEnv("BENCH_HOSTS_CONCURRENCY", 32)
const REQUESTS = intEnv("BENCH_HOSTS_REQUESTS", 800)
const WARMUP = intEnv("BENCH_HOSTS_WARMUP", 100)
const ROUNDS = intEnv("BENCH_HOSTS_ROUNDS", 2)

interface Phase {
  readonly hosts: number
  readonly round: number
  readonly callsPerSecond: number
  readonly p50: number
  readonly p99: number
  readonly errors: number
}

const jobsFor = async (agentId: string, count: number, offset: number): Promise<Array<Job>> => {
  const signed = await signAll(paymentRequests(count, PRICE, { payers: PAYERS }))
  return signed.map((payment, i) => ({
    headers: { "x-payment": payment.header },
    body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "hello", n: offset + i } })
  }))
}

const completed = (body: unknown) => at(body, "data", "status") === "completed" ? undefined : "not completed"

const main = async () => {
  installSignalHandlers()
  const machine = machineInfo()
  log(`bench:hosts: one instance against two at c=${CONCURRENCY} (nproc ${machine.nproc})`)
  const cluster = await startCluster({ confirmations: 1 })
  const agentId = await registerAgent({ agentUrl: cluster.agentUrl }, cluster.balancer)
  const targets = { 1: await balancer([cluster.instances[0]!.origin]), 2: cluster.balancer } as const
  const phases: Array<Phase> = []
  let offset = 0
  for (let round = 1; round <= ROUNDS; round++) {
    for (const hosts of [1, 2] as const) {
      const origin = targets[hosts]
      const warmup = await jobsFor(agentId, WARMUP, (offset += 100_000))
      await runClosedLoop({ origin, path: "/api/v1/execute", jobs: warmup, concurrency: CONCURRENCY, check: completed })
      const jobs = await jobsFor(agentId, REQUESTS, (offset += 100_000))
      const run = await runClosedLoop({ origin, path: "/api/v1/execute", jobs, concurrency: CONCURRENCY, check: completed })
      const phase = {
        hosts,
        round,
        callsPerSecond: (run.requests * 1000) / run.wallMs,
        p50: percentile(run.latenciesMs, 50),
        p99: percentile(run.latenciesMs, 99),
        errors: run.errors
      }
      phases.push(phase)
      log(`  round ${round}, ${hosts} host${hosts === 1 ? "" : "s"}: ${phase.callsPerSecond.toFixed(1)} calls/s, p50 ${ms(phase.p50)} ms, p99 ${ms(phase.p99)} ms, ${run.errors} errors${run.errors > 0 ? ` (${run.errorSamples.join("; ")})` : ""}`)
    }
  }
  const of = (hosts: number) => phases.filter((p) => p.hosts === hosts)
  const avg = (hosts: number, pick: (p: Phase) => number) => mean(Float64Array.from(of(hosts).map(pick)))
  const ratio = avg(2, (p) => p.callsPerSecond) / avg(1, (p) => p.callsPerSecond)
  const rows = phases.map((p) => `| ${p.round} | ${p.hosts} | ${REQUESTS} | **${p.callsPerSecond.toFixed(1)}** | ${ms(p.p50)} | ${ms(p.p99)} | ${p.errors} |`)
  const body = [
    "## Hosts: one instance against two (bench/hosts.ts)",
    "",
    `\`npm run bench:hosts\`, ${new Date().toISOString()}; ${machine.nproc} cores, Node ${process.version}; load average ${os.loadavg().map((l) => l.toFixed(2)).join(", ")} after.`,
    "",
    `Two instances of the service (\`npm start\`, each its own process and data directory) on one PostgreSQL and one anvil (automine), the campaign's cluster (bench/chaos/cluster.ts); every phase goes through a plain round-robin balancer in Node (over instance A alone, or over A and B), closed loop at c=${CONCURRENCY}, ${WARMUP} warm-up and ${REQUESTS} measured calls, x402 v1 payments signed before the phase. Everything (two instances, PostgreSQL, anvil, the balancer, the client) shares the machine's ${machine.nproc} cores, so the second instance can only add what the first one left of the CPU.`,
    "",
    "| round | instances | calls | calls/s | p50 ms | p99 ms | errors |",
    "|---|---|---|---|---|---|---|",
    ...rows,
    "",
    `Two instances against one: **${ratio.toFixed(2)}×** (means ${avg(2, (p) => p.callsPerSecond).toFixed(1)} against ${avg(1, (p) => p.callsPerSecond).toFixed(1)} calls/s).`
  ].join("\n")
  await writeSection(OUTPUT, "hosts", body)
  log(`  two against one: ${ratio.toFixed(2)}x; wrote ${path.relative(ROOT, OUTPUT)}`)
  await cleanupAll()
  const errors = phases.reduce((n, p) => n + p.errors, 0)
  if (errors > 0) throw new BenchError(`${errors} paid calls failed; the section was written with them`)
  process.exit(0)
}

main().catch(async (error: unknown) => {
  console.error(error)
  await cleanupAll()
  process.exit(1)
})
