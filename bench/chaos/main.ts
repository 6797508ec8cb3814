// The fault campaign (`npm run chaos -- --rounds N [--seed S] [--calls C] [--concurrency K] [--channel-calls M]
// [--faults a,b]`): two instances of the service on one PostgreSQL and one chain behind a round-robin balancer, under
// paid-call load (exact payments, and payers paying by batch-settlement channel); each round strikes one
// fault at a random moment (kill -9 of an instance, kill -9 of PostgreSQL, the RPC failing or hanging, a reorg), waits
// until the cluster finished what the round started, and checks the money (checks.ts). Prints every round and writes
// its section of docs/reliability.md. Not a test: it runs for minutes per round and is not in CI.
import { execSync } from "node:child_process"
import * as path from "node:path"
import { prng } from "../lib/catalogue.js"
import { cleanupAll, installSignalHandlers } from "../lib/children.js"
import { registerAgent } from "../lib/jobs.js"
import { log, ROOT, sleep } from "../lib/params.js"
import { balancesOf, check, payerAddresses, settle } from "./checks.js"
import { startCluster } from "./cluster.js"
import { FAULT_KINDS, type FaultKind, inject } from "./faults.js"
import { channelPayers } from "./channelLoad.js"
import { paidLoad } from "./load.js"
import { type RoundResult, roundLine, writeReport } from "./report.js"

/** Payers that pay by batch-settlement channel (the official client), beside the exact payers. */
const CHANNEL_PAYERS = 2

/** Blocks before a treasury transaction is final: deeper than the deepest reorg the campaign makes (3). */
const CONFIRMATIONS = 4

const flag = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  const n = i < 0 ? fallback : Number(process.argv[i + 1])
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer`)
  return n
}

/** `--faults reorg,kill-instance`: only these kinds (all by default). */
const faultKinds = (): ReadonlyArray<FaultKind> => {
  const i = process.argv.indexOf("--faults")
  if (i < 0) return FAULT_KINDS
  const named = String(process.argv[i + 1]).split(",")
  const unknown = named.filter((k) => !(FAULT_KINDS as ReadonlyArray<string>).includes(k))
  if (unknown.length > 0) throw new Error(`--faults: unknown ${unknown.join(", ")} (known: ${FAULT_KINDS.join(", ")})`)
  return FAULT_KINDS.filter((k) => named.includes(k))
}

const main = async () => {
  installSignalHandlers()
  const rounds = flag("rounds", 10)
  const seed = flag("seed", Date.now() % 1_000_000)
  const calls = flag("calls", 40)
  const concurrency = flag("concurrency", 8)
  const channelCalls = flag("channel-calls", 5)
  const kinds = faultKinds()
  const output = process.env["CHAOS_OUTPUT"] ?? path.join(ROOT, "docs", "reliability.md")
  const random = prng(seed)
  const startedAt = new Date()
  const commit = execSync("git rev-parse --short HEAD").toString().trim()
  log(`chaos: ${rounds} rounds of ${calls} paid calls (c=${concurrency}), seed ${seed}`)
  const cluster = await startCluster({ confirmations: CONFIRMATIONS })
  log(`  instances ${cluster.instances.map((i) => i.origin).join(", ")} behind ${cluster.balancer}`)
  const agentId = await registerAgent({ agentUrl: cluster.agentUrl }, cluster.balancer)
  const initial = await balancesOf(cluster, payerAddresses())
  const channels = await channelPayers(cluster.anvilUrl, CHANNEL_PAYERS, seed)
  const channelInitial = await balancesOf(cluster, channels.addresses)
  const results: Array<RoundResult> = []
  for (let round = 1; round <= rounds; round++) {
    const kind = kinds[Math.floor(random() * kinds.length)]!
    const atMs = Math.floor(random() * 3_000)
    const started = Date.now()
    const load = paidLoad(cluster.balancer, agentId, calls, concurrency, round * 1_000)
    const byChannel = channels.round(cluster.balancer, agentId, channelCalls, round * 10_000)
    await sleep(atMs)
    const fault = await inject(cluster, kind, random).catch((e: unknown) => ({ kind, detail: `the fault itself failed: ${String(e).slice(0, 200)}` }))
    const answered = await load
    const channelAnswered = await byChannel
    const loadDone = Date.now()
    const open = await settle(cluster, CONFIRMATIONS, 240_000)
    const settledS = Math.round((Date.now() - loadDone) / 1000)
    const anomalies = await check(cluster, initial, channelInitial, open).catch((e: unknown) => [`the checks failed to run: ${String(e).slice(0, 300)}`])
    const result: RoundResult = { round, fault, atMs, calls: answered, channelCalls: channelAnswered, anomalies, settledS }
    results.push(result)
    log(`  ${roundLine(result)} (${Math.round((Date.now() - started) / 1000)} s)`)
    await writeReport(output, { command: `npm run chaos -- ${process.argv.slice(2).join(" ")}`.trim(), seed, startedAt, rounds: results, commit })
  }
  const total = results.reduce((n, r) => n + r.anomalies.length, 0)
  log(`chaos: ${results.length} rounds, ${total} anomalies; written to ${output}`)
  await cleanupAll()
  process.exit(total === 0 ? 0 : 1)
}

main().catch(async (error: unknown) => {
  console.error(error)
  await cleanupAll()
  process.exit(2)
})
