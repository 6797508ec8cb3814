// One mode of the settlement bench (bench/settle.ts): the service's own layers in this process on a fresh database, the
// payments reserved untimed, then settled through Payments.settle (the settler, the treasury writer, the settlement
// machine and its ledger booking) with a given number in flight, level by level.
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { ChainLive } from "../../layers/Chain.js"
import { ConfigLive } from "../../layers/Config.js"
import { DEVNET_USDC_ADDRESS } from "../../layers/devnet/anvil.js"
import { PaymentVerifier } from "../../layers/PaymentVerifier.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { Payments, type Settlement } from "../../services/payments/Payments.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { makeServicesLive } from "../../src/App.js"
import { percentile } from "./load.js"
import { BenchError, log, ms } from "./params.js"
import type { SignedPayment } from "./payments.js"
import { cpuMs, postgresCpuMs, postmasterPid } from "./proc.js"
import { blockNumber } from "./snapshot.js"

export interface Level {
  readonly concurrency: number
  readonly payments: number
  /**
   * "recorded": Payments.settle (on chain, then the payment's machine and ledger booking in its own transaction);
   * "chain": Payments.settleOnChain only (the treasury side: settler, writer, receipt), recorded afterwards untimed.
   */
  readonly measure: "recorded" | "chain"
}

export interface LevelResult extends Level {
  readonly wallMs: number
  readonly perSecond: number
  readonly p50: number
  readonly p99: number
  /** Chain transactions the treasury sent for the level, by kind. */
  readonly singles: number
  readonly batches: number
  readonly blocks: number
  /** CPU ms per payment: this process (the service's settlement path), PostgreSQL, anvil. */
  readonly cpu: { readonly service: number; readonly postgres: number; readonly anvil: number }
}

export interface ModeResult {
  readonly name: string
  readonly batchMax: number
  readonly batching: boolean
  readonly levels: ReadonlyArray<LevelResult>
  readonly drift: bigint
}

export interface ModeOptions {
  readonly name: string
  readonly batchMax: number
  readonly rpcUrl: string
  readonly databaseUrl: string
  readonly dataDir: string
  readonly pgDir: string
  readonly anvilPid: number
  readonly warmup: ReadonlyArray<SignedPayment>
  /** Signed payments per level, in order. */
  readonly levels: ReadonlyArray<{ readonly level: Level; readonly signed: ReadonlyArray<SignedPayment> }>
}

/** The payment the verifier would hand over for a signed header (the bench measures settlement, not verification). */
const verified = (s: SignedPayment, network: string): VerifiedPayment => ({
  payer: s.from.toLowerCase() as `0x${string}`,
  payTo: s.to,
  asset: DEVNET_USDC_ADDRESS,
  network,
  amount: s.value,
  nonce: s.nonce,
  validAfter: s.validAfter,
  validBefore: s.validBefore,
  signature: s.signature,
  headerSha256: createHash("sha256").update(s.header).digest("hex")
})

const program = (options: ModeOptions) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const payments = yield* Payments
    const pgPid = postmasterPid(options.pgDir)
    const reserveAll = (signed: ReadonlyArray<SignedPayment>, tag: string) =>
      Effect.forEach(signed, (s, i) => {
        const p = verified(s, "base-sepolia")
        return Effect.map(payments.reserve(p, "execution", `bench_${tag}_${i}`), (id) => ({ id, p }))
      }, { concurrency: 16 })
    // Used only with a facilitator; the signature asks for it.
    const requirements = (yield* PaymentVerifier).requirements({ amount: 1n, resource: "bench", description: "settlement bench" })
    const txCount = Effect.map(
      sql<{ purpose: string; n: number }>`SELECT purpose, count(*)::int AS n FROM treasury_txs WHERE purpose IN ('settlement', 'settlement_batch') GROUP BY purpose`,
      (rows) => ({ singles: rows.find((r) => r.purpose === "settlement")?.n ?? 0, batches: rows.find((r) => r.purpose === "settlement_batch")?.n ?? 0 })
    )
    const mustSettle = (id: string, outcome: { readonly _tag: string }) =>
      outcome._tag === "Settled" ? Effect.void : Effect.dieMessage(`payment ${id} did not settle: ${JSON.stringify(outcome)}`)
    type Item = { readonly id: string; readonly p: VerifiedPayment }
    const settleAll = (items: ReadonlyArray<Item>, concurrency: number, measure: Level["measure"]) =>
      Effect.gen(function* () {
        const onChain: Array<{ readonly id: string; readonly settlement: Settlement }> = []
        const latencies = yield* Effect.forEach(items, ({ id, p }) =>
          Effect.gen(function* () {
            const t0 = performance.now()
            if (measure === "recorded") {
              yield* Effect.flatMap(payments.settle(id, p, requirements), (o) => mustSettle(id, o))
            } else {
              const settlement = yield* payments.settleOnChain(id, p, requirements)
              yield* mustSettle(id, settlement.outcome)
              onChain.push({ id, settlement })
            }
            return performance.now() - t0
          }), { concurrency })
        // For the caller to run untimed: book what was settled on chain only, so the ledger keeps up with the chain.
        const book = Effect.forEach(onChain, ({ id, settlement }) => sql.withTransaction(payments.recordIn(id, settlement)), { concurrency: 8, discard: true })
        return { latencies, book }
      })

    yield* Effect.flatMap(settleAll(yield* reserveAll(options.warmup, "warmup"), 8, "recorded"), (r) => r.book)
    const results: Array<LevelResult> = []
    for (const [n, { level, signed }] of options.levels.entries()) {
      const items = yield* reserveAll(signed, `l${n}`)
      const txBefore = yield* txCount
      const heightBefore = yield* Effect.promise(() => blockNumber(options.rpcUrl))
      const cpuBefore = { service: cpuMs(process.pid), postgres: postgresCpuMs(pgPid), anvil: cpuMs(options.anvilPid) }
      const t0 = performance.now()
      const { latencies, book } = yield* settleAll(items, level.concurrency, level.measure)
      const wallMs = performance.now() - t0
      const cpuAfter = { service: cpuMs(process.pid), postgres: postgresCpuMs(pgPid), anvil: cpuMs(options.anvilPid) }
      yield* book
      const txAfter = yield* txCount
      const heightAfter = yield* Effect.promise(() => blockNumber(options.rpcUrl))
      const sorted = Float64Array.from(latencies)
      const result: LevelResult = {
        ...level,
        wallMs,
        perSecond: (1000 * items.length) / wallMs,
        p50: percentile(sorted, 50),
        p99: percentile(sorted, 99),
        singles: txAfter.singles - txBefore.singles,
        batches: txAfter.batches - txBefore.batches,
        blocks: heightAfter - heightBefore,
        cpu: {
          service: (cpuAfter.service - cpuBefore.service) / items.length,
          postgres: (cpuAfter.postgres - cpuBefore.postgres) / items.length,
          anvil: (cpuAfter.anvil - cpuBefore.anvil) / items.length
        }
      }
      log(
        `    ${options.name} c=${level.concurrency} (${level.measure}): ${items.length} payments in ${ms(wallMs)} ms = ${result.perSecond.toFixed(0)} settled/s, ` +
          `p50 ${ms(result.p50)} ms, p99 ${ms(result.p99)} ms; ${result.singles} single + ${result.batches} batch transactions in ${result.blocks} blocks; ` +
          `CPU/payment service ${result.cpu.service.toFixed(2)}, postgres ${result.cpu.postgres.toFixed(2)}, anvil ${result.cpu.anvil.toFixed(2)} ms`
      )
      results.push(result)
    }
    const drift = (yield* (yield* Reconciliation).check()).drift
    if (drift !== 0n) throw new BenchError(`${options.name}: the ledger's treasury differs from the chain's by ${drift} micro-USDC`)
    return { name: options.name, batchMax: options.batchMax, batching: payments.settlementQueue.batching, levels: results, drift } satisfies ModeResult
  })

/** Runs one mode with the service's layers (no HTTP server, no background workers) against the given chain and database. */
export const runMode = (options: ModeOptions): Promise<ModeResult> => {
  const provider = ConfigProvider.fromMap(new Map(Object.entries({
    DATABASE_URL: options.databaseUrl,
    DEVNET_RPC_URL: options.rpcUrl,
    DATA_DIR: options.dataDir,
    BACKGROUND_WORKERS: "false",
    SETTLEMENT_BATCH_MAX: String(options.batchMax),
    // Hundreds of settlements waiting for the treasury's nonce row hold the pool's connections for seconds one by one.
    DATABASE_CONNECT_TIMEOUT_MS: "120000"
  })))
  const live = makeServicesLive(ChainLive).pipe(Layer.provide(ConfigLive), Layer.provide(Layer.setConfigProvider(provider)))
  return Effect.runPromise(program(options).pipe(Effect.provide(live), Effect.scoped))
}
