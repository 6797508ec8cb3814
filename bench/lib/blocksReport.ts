// The block-time bench's section of docs/performance.md (bench/blocks.ts), rendered from its results, with the reason
// for each difference computed from the same numbers.
import type { LevelResult, ModeResult } from "./blocksRun.js"
import type { machineInfo } from "./machine.js"

export interface BlocksReport {
  readonly date: string
  readonly durationSeconds: number
  readonly machine: ReturnType<typeof machineInfo>
  readonly loadAfter: ReadonlyArray<number>
  readonly payers: number
  readonly modes: ReadonlyArray<ModeResult>
}

/** ms for the tables, with the precision that matters at its size. */
const t = (n: number) => (Number.isNaN(n) ? "–" : n >= 100 ? n.toFixed(0) : n.toFixed(1))
/** A duration in prose, with its unit. */
const d = (n: number) => (Number.isNaN(n) ? "–" : n >= 1_000 ? `${(n / 1000).toFixed(n >= 10_000 ? 1 : 2)} s` : `${n.toFixed(n >= 100 ? 0 : 1)} ms`)
const pct = (share: number) => `${(100 * share).toFixed(0)}%`
const perTx = (l: LevelResult) => l.requests / Math.max(1, l.transactions)
const r = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))
const load = (l: ReadonlyArray<number>) => l.map((x) => x.toFixed(2)).join(", ")
const blocksLabel = (m: ModeResult) => `${m.blockTime === undefined ? "automine" : `${m.blockTime} s`}${m.batchMax === 1 ? ", one by one" : ""}`

/** "1: 90%, 2: 10%": the share of calls whose settlement landed 1, 2, … blocks after the last block seen at their send. */
const waited = (l: LevelResult) => {
  const entries = Object.entries(l.blocksWaited).map(([k, v]) => [Number(k), v] as const).sort((a, b) => a[0] - b[0])
  const total = entries.reduce((s, [, v]) => s + v, 0)
  return entries.map(([k, v]) => `${k}: ${((100 * v) / Math.max(1, total)).toFixed(0)}%`).join(", ")
}
const shareAtLeast = (l: LevelResult, blocks: number) => {
  const entries = Object.entries(l.blocksWaited).map(([k, v]) => [Number(k), v] as const)
  const total = entries.reduce((s, [, v]) => s + v, 0)
  return entries.filter(([k]) => k >= blocks).reduce((s, [, v]) => s + v, 0) / Math.max(1, total)
}

const level = (m: ModeResult | undefined, c: number) => m?.levels.find((l) => l.concurrency === c)

const row = (m: ModeResult, l: LevelResult) =>
  `| ${blocksLabel(m)} | ${l.concurrency} | ${l.requests} | **${r(l.throughput)}** | **${t(l.p50)}** | ${t(l.p95)} | ${t(l.p99)} | ${t(l.mined.p50)} / ${t(l.mined.p95)} | ` +
  `${t(l.afterBlock.p50)} / ${t(l.afterBlock.p95)} | ${l.transactions} / ${l.settlementBlocks} | ${r(perTx(l))} | ${waited(l)} | ${l.errors} |`

export const renderBlocksSection = (report: BlocksReport): string => {
  const auto = report.modes.find((m) => m.blockTime === undefined)
  const timed = report.modes.filter((m) => m.blockTime !== undefined && m.batchMax !== 1)
  const controlFor = (m: ModeResult) => level(report.modes.find((o) => o.batchMax === 1 && o.blockTime === m.blockTime), 32)
  const busy = (report.machine.loadAverage[0] ?? 0) >= 1
  const reasons: Array<string> = []

  const a1 = level(auto, 1)
  const a32 = level(auto, 32)
  if (a1 !== undefined && a32 !== undefined) {
    reasons.push(
      `- **automine** (a block per transaction, at once): nothing waits for a block, so latency is the service's own work (verification, the database, its RPC round trips): ${d(a1.p50)} p50 at c=1. ` +
        `The service asks for a settlement's receipt right after sending it (\`TreasuryWriter.awaitReceipt\`), and on automine it is already there: the answer comes ${d(a1.afterBlock.p50)} (p50) after the block. ` +
        `At c=32, ${r(perTx(a32))} calls share a settlement transaction (group commit with the SettlementBatcher), so the chain does not bound throughput (${r(a32.throughput)} calls/s); ` +
        `${d(a32.p50)} p50 is the queue for the CPU (32 calls in flight on two cores${busy ? ", shared with other work" : ""}) and the group commit: a payment that arrives while a batch is in flight waits for it (here every batch is a block of its own, so *blocks waited* counts the batches ahead of a call: ${waited(a32)}).`
    )
  }
  for (const m of timed) {
    const bt = (m.blockTime ?? 0) * 1000
    const c1 = level(m, 1)
    const c32 = level(m, 32)
    if (c1 !== undefined) {
      reasons.push(
        `- **${m.blockTime} s blocks, c=1**: ${d(c1.p50)} p50 = ${(c1.p50 / bt).toFixed(2)} block times. The call answers only after its settlement is mined (the settlement and the agent call run side by side and are recorded together in one database transaction, \`services/executions/finish.ts\`), so every call waits for a block. ` +
          `In a closed loop the next call is sent right after the previous answer, i.e. shortly after a block, so it waits out the rest of that block interval (on chain ${d(c1.mined.p50)} p50 after the send), then ${d(c1.afterBlock.p50)} (p50) more: the receipt is not there when the service first asks, right after sending, so it waits with viem's \`waitForTransactionReceipt\`, which follows new blocks by polling every 250 ms in production mode (\`layers/chainTransport.ts\`, \`pollingIntervalFor("rpc")\`; 20 ms on the devnet), then records and answers. ` +
          `Throughput is one call per block: ${r(c1.throughput)} calls/s (1 / block time = ${r(1000 / bt)}).` +
          (shareAtLeast(c1, 2) > 0.05 ? ` ${pct(shareAtLeast(c1, 2))} of the calls landed two or more blocks after their send: a transaction sent too close to the block boundary misses it.` : "")
      )
    }
    if (c32 !== undefined) {
      const little = (32 * 1000) / c32.mean
      const third = shareAtLeast(c32, 3)
      reasons.push(
        `- **${m.blockTime} s blocks, c=32**: ${r(c32.throughput)} calls/s, ${d(c32.p50)} p50 = ${(c32.p50 / bt).toFixed(2)} block times${c1 === undefined ? "" : ` (${(c32.p50 / c1.p50).toFixed(2)}× c=1's)`}. ` +
          `Batching amortises the block: ${r(perTx(c32))} calls per settlement transaction, ${c32.transactions} transactions in ${c32.settlementBlocks} blocks, so throughput is concurrency over latency (32 / mean latency = ${r(little)} calls/s), not the chain's transactions per block. ` +
          (shareAtLeast(c32, 2) > 0.05
            ? `But ${pct(shareAtLeast(c32, 2))} of the calls were settled two or more blocks after their send (blocks waited: ${waited(c32)}): a partial batch waits behind the transaction in flight, so it pays a second block.`
            : `Each wave lands in the next block (blocks waited: ${waited(c32)}): on an RPC the group commit sends the first payment of a wave at once and, 150 ms later, the rest as a batch beside it (\`services/payments/Settler.ts\`, \`RPC_BATCH_LINGER_MS\`), so both are in the same block. Before that linger a partial batch waited for the transaction in flight to be mined and every wave took two blocks (measured: 23.8 s p50 and 1.33 calls/s at 12 s blocks, c=32; 1.99 block times).`) +
          (third > 0.05 ? ` ${pct(third)} waited three or more blocks: signing and storing a batch can miss the next block.` : "") +
          (() => {
            const control = controlFor(m)
            if (control !== undefined) {
              return ` Measured with \`SETTLEMENT_BATCH_MAX=1\` (a transaction per payment, each sent at once: the row *one by one*): ${d(control.p50)} p50 (${(control.p50 / bt).toFixed(2)} block times, ${pct(shareAtLeast(control, 2))} of the calls settled later than the next block) and ${r(control.throughput)} calls/s, against ${d(c32.p50)} and ${r(c32.throughput)} batched; what batching buys is ${r(perTx(c32))} calls per transaction instead of 1 (${c32.transactions} transactions for ${c32.requests} calls, against ${control.transactions} for ${control.requests}): gas, and the treasury's nonce sequence.`
            }
            return c1 === undefined ? "" : ` Were every call settled in the first block after its send, as at c=1, c=32 would answer in about c=1's time and reach about 32 / ${d(c1.mean)} ≈ ${r((32 * 1000) / c1.mean)} calls/s (an estimate, not measured).`
          })() +
          ""
      )
    }
  }

  const reconciliation = report.modes
    .map((m) => `${blocksLabel(m)}: drift ${m.reconciliation.drift}, in flight ${m.reconciliation.inFlightIncoming} in / ${m.reconciliation.inFlightOutgoing} out, /health ${m.health}`)
    .join("; ")

  return [
    "## Paid calls by block time (bench/blocks.ts)",
    "",
    `Generated by \`npm run bench:blocks\` on **${report.date}** in ${report.durationSeconds.toFixed(0)} s (code at ${report.machine.git}, \`nproc\` ${report.machine.nproc}, ${report.machine.cpuModel}, Node ${report.machine.node}). Only this section is rewritten by that run.`,
    "",
    `- Load average before the run ${load(report.machine.loadAverage)}, after ${load(report.loadAfter)}.` +
      (busy
        ? " **Shared machine**: other work was running on the two cores during this run, so the automine figures (CPU-bound) understate what the service does on a machine of its own; the block-bound figures (2 s, 12 s) are affected least."
        : " (two cores; a load near 2 before the run would mean other work shared them)."),
    `- Production mode as an operator runs it: the bundle (\`src/tools/start.mjs\`) with \`CHAIN_RPC_URL\` (not devnet mode), a freshly generated treasury key funded with ETH, a USDC token deployed for the run, the SettlementBatcher deployed by our deploy command (\`layers/batcherDeploy.ts\`), ${report.payers} fresh payers holding USDC; one embedded PostgreSQL (durable settings) started by the bench. Set-up once on an automine anvil (the agent registered and paid for, pinned to tier premium), then every block time starts a new anvil from that chain's saved state (\`--load-state\`, and \`--block-time N\` or automine) and the service on a copy of that database.`,
    "- A paid call is `POST /api/v1/execute` with an X-PAYMENT header pre-signed before the level (x402 v1 exact, EIP-712 TransferWithAuthorization of 0.011 USDC to the treasury), to the echo agent in the bench process; closed loop (undici), warm-up calls not measured; every answer must be `completed` and `settled` with the echo. Latency is from the send to the answer; a call's answer comes after its payment is settled on chain **and booked** (settlement and the agent's result are recorded in one database transaction before the answer), so the answer is also when the payment is booked in the ledger. It is final later, once \`CHAIN_CONFIRMATIONS\` blocks hold it (5 for this chain id: a follower finalizes it, or sends it again after a reorg; it does not delay the answer).",
    ...(report.modes.some((m) => m.batchMax === 1)
      ? ["- *one by one*: the same block time run again at c=32 with `SETTLEMENT_BATCH_MAX=1` (the service's own setting: a treasury transaction per payment, sent at once), the control for what the SettlementBatcher's group commit costs and buys."]
      : []),
    "- *On chain*: from the send to the first sight of the block holding the call's settlement transaction (the bench polls `eth_blockNumber` every 20 ms). *After the block*: from that sight to the answer. *Blocks waited*: the share of calls by how many blocks after the last one seen at their send their settlement landed in (1 = the next block).",
    "",
    "| blocks | concurrency | calls | throughput (calls/s) | p50 (ms) | p95 (ms) | p99 (ms) | on chain p50 / p95 (ms) | after the block p50 / p95 (ms) | settlement transactions / blocks | calls per transaction | blocks waited | errors |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ...report.modes.flatMap((m) => m.levels.map((l) => row(m, l))),
    "",
    `Ledger = chain after each run (the operator reconciliation, micro-USDC): ${reconciliation}. Samples at 12 s blocks are few (a 12 s call cannot be hurried): their p99 is the maximum.`,
    "",
    "Why they differ:",
    "",
    ...reasons
  ].join("\n")
}

export const summaryLines = (report: BlocksReport): Array<string> => [
  "  summary (latency p50 / p95 / p99, throughput calls/s):",
  ...report.modes.flatMap((m) =>
    m.levels.map((l) => `    ${blocksLabel(m).padEnd(8)} c=${String(l.concurrency).padEnd(2)} ${d(l.p50)} / ${d(l.p95)} / ${d(l.p99)}, ${r(l.throughput)}/s, ${r(perTx(l))} calls per settlement tx, ${l.errors} errors`)
  ),
  ...report.modes.map((m) => `    ${blocksLabel(m)}: drift ${m.reconciliation.drift}, /health ${m.health}`)
]
