// The treasury's ETH for gas, priced at the fees of the moment: an alert gauge and a degraded /health while the
// treasury can still pay for TREASURY_GAS_LOW_TRANSACTIONS payouts, so an operator tops it up before sends fail.
import { Clock, Config, Duration, Effect, Layer, Option, Ref, Schedule } from "effect"
import { Gauge } from "prom-client"
import type { ChainShape } from "../../layers/Chain.js"
import { Networks } from "../../layers/Networks.js"
import { Leases } from "../../layers/cluster/Leases.js"
import { clusterRegistry } from "../../layers/observability/Metrics.js"
import { ChainReadError } from "./chainReads.js"

export interface GasStatus {
  readonly balanceWei: bigint
  /** What one payout-sized transaction may cost now: the chain's max fee per gas × PAYOUT_GAS. */
  readonly perTransactionWei: bigint
  /** How many such transactions the balance pays for. */
  readonly transactionsLeft: bigint
  readonly low: boolean
  readonly checkedAt: number
}

/** Gas of the largest single treasury transaction we send alone (a refund or payout is ≈ 60,000; a settlement 150,000). */
export const PAYOUT_GAS = 200_000n

// What an alert rule reads: cluster-wide (every instance watches the one treasury), so exported only by the instance
// holding the gas watch's lease, in the registry of cluster-wide series (no `instance` label).
const gasWei = new Gauge({ name: "treasury_gas_balance_wei", help: "The treasury's ETH balance for gas, wei (as a float)", registers: [] })
const gasTransactionsLeft = new Gauge({
  name: "treasury_gas_transactions_left",
  help: "How many payout-sized transactions (200,000 gas) the treasury's ETH pays for at the current max fee per gas",
  registers: []
})
const gasLow = new Gauge({ name: "treasury_gas_low", help: "1 while treasury_gas_transactions_left is below TREASURY_GAS_LOW_TRANSACTIONS", registers: [] })
const gasGauges = [
  { name: "treasury_gas_balance_wei", gauge: gasWei },
  { name: "treasury_gas_transactions_left", gauge: gasTransactionsLeft },
  { name: "treasury_gas_low", gauge: gasLow }
]

const setGauges = (status: GasStatus) => {
  gasWei.set(Number(status.balanceWei))
  gasTransactionsLeft.set(Number(status.transactionsLeft))
  gasLow.set(status.low ? 1 : 0)
}

/** The lease under which one instance of the cluster logs the gas alerts and exports the gauges. */
export const GAS_WATCH_LEASE = "treasury.gas-watch"

const read = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (error) => new ChainReadError({ message: `${what}: ${String(error).slice(0, 200)}` }) })

export class GasWatch extends Effect.Service<GasWatch>()("treasury/GasWatch", {
  effect: Effect.gen(function* () {
    const networks = yield* Networks
    const lowTransactions = yield* Config.integer("TREASURY_GAS_LOW_TRANSACTIONS").pipe(
      Config.withDefault(100),
      Config.validate({ message: "TREASURY_GAS_LOW_TRANSACTIONS must be a positive integer", validation: (n) => n > 0 })
    )
    // Every instance checks (its own /health says degraded while gas is low); only the one that alerts logs the
    // transitions and exports the gauges. Alone (no lease kept: BACKGROUND_WORKERS=false) it alerts.
    const alerting = yield* Ref.make(true)
    /** One network's watch; the gauges (an alert rule's input) are the primary network's. */
    const watchOn = (chain: ChainShape, gauges: boolean) => Effect.gen(function* () {
      const latest = yield* Ref.make(Option.none<GasStatus>())

      /** Reads the balance and the fees now; with no treasury key (nothing to pay gas for) there is nothing to watch. */
      const check = Effect.gen(function* () {
        if (Option.isNone(chain.signer)) return Option.none<GasStatus>()
        const [balanceWei, fees] = yield* Effect.all([
          read("treasury ETH balance", () => chain.publicClient.getBalance({ address: chain.treasury })),
          read("fee estimate", () => chain.publicClient.estimateFeesPerGas())
        ], { concurrency: 2 })
        const perTransactionWei = (fees.maxFeePerGas ?? 1n) * PAYOUT_GAS
        const transactionsLeft = balanceWei / (perTransactionWei > 0n ? perTransactionWei : 1n)
        const low = transactionsLeft < BigInt(lowTransactions)
        const status: GasStatus = { balanceWei, perTransactionWei, transactionsLeft, low, checkedAt: yield* Clock.currentTimeMillis }
        const wasLow = Option.match(yield* Ref.getAndSet(latest, Option.some(status)), { onNone: () => false, onSome: (s) => s.low })
        if (!(yield* Ref.get(alerting))) return Option.some(status)
        if (gauges) setGauges(status)
        if (low && !wasLow) {
          yield* Effect.logWarning("treasury gas low: top up its ETH before payouts and settlements start failing", {
            treasury: chain.treasury,
            network: chain.network,
            balanceWei: balanceWei.toString(),
            transactionsLeft: transactionsLeft.toString(),
            threshold: lowTransactions
          })
        }
        if (!low && wasLow) yield* Effect.logInfo("treasury gas topped up", { treasury: chain.treasury, network: chain.network, transactionsLeft: transactionsLeft.toString() })
        return Option.some(status)
      }).pipe(Effect.withSpan("GasWatch.check"))
      return { network: chain.network, check, status: Ref.get(latest) } as const
    })

    const primary = yield* watchOn(networks.primary, true)
    /** The other networks' watches: their ETH pays for their own settlements and refunds. */
    const others = yield* Effect.forEach(networks.all.slice(1), (c) => watchOn(c, false))
    /** Every network's check; the primary's result. */
    const check = Effect.zipLeft(
      primary.check,
      Effect.forEach(others, (o) => o.check.pipe(Effect.catchAll((e) => Effect.logWarning(`treasury gas check (${o.network}): ${e.message}`))), { discard: true })
    )
    /** A network's last status (the primary's for a name not configured). */
    const statusOf = (network: string) => (others.find((o) => o.network === network) ?? primary).status

    /** Whether this instance logs the alerts and exports the gauges (the lease holder's); the gauges follow at once. */
    const setAlerting = (on: boolean) =>
      Effect.gen(function* () {
        yield* Ref.set(alerting, on)
        const last = yield* primary.status
        yield* Effect.sync(() => {
          for (const g of gasGauges) {
            clusterRegistry.removeSingleMetric(g.name)
            g.gauge.reset()
          }
          if (!on) return
          for (const g of gasGauges) clusterRegistry.registerMetric(g.gauge)
          if (Option.isSome(last)) setGauges(last.value)
        })
      })
    yield* setAlerting(true)

    return { check, status: primary.status, statusOf, lowTransactions, setAlerting } as const
  })
}) {}

/** Checks at start, then every 30 s, in every instance; alerts from the one holding the gas watch's lease. */
export const GasWatchLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const watch = yield* GasWatch
    const leases = yield* Leases
    const { held } = yield* leases.keep(GAS_WATCH_LEASE, { onGain: watch.setAlerting(true), onLose: watch.setAlerting(false) })
    if (!(yield* held)) yield* watch.setAlerting(false)
    yield* watch.check.pipe(
      Effect.catchAll((e) => Effect.logWarning(`treasury gas check: ${e.message}`)),
      Effect.repeat(Schedule.spaced(Duration.seconds(30))),
      Effect.forkScoped
    )
  })
)
