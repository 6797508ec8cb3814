// Reconciliation: the ledger's treasury account against the treasury's USDC on chain at one (final) block. Treasury bookings
// carry the block they were mined in, so a check at block B counts exactly what the chain had done by B; what the chain
// had done by B that the ledger books later (money in flight: services/treasury/inFlight.ts) is not drift.
import { SqlClient } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import type { ChainShape } from "../../layers/Chain.js"
import { Leases } from "../../layers/cluster/Leases.js"
import { Networks } from "../../layers/Networks.js"
import { finalBlock } from "../../layers/confirmations.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { ChainReadError } from "./chainReads.js"
import { ChannelReconciliation } from "./ChannelReconciliation.js"
import { type InFlight, inFlightAt, unbookedStatement } from "./inFlight.js"

export interface ReconciliationResult {
  readonly block: bigint
  readonly chainBalance: bigint
  readonly ledgerBalance: bigint
  /** Done on chain by the block, booked later: payments settled before their outcome, payouts before their receipt. */
  readonly inFlight: InFlight
  /** chain − (ledger + in flight): positive when the treasury holds money the ledger does not explain. */
  readonly drift: bigint
}

const Last = Schema.Struct({ blockNumber: Schema.BigInt, chainBalance: Schema.BigInt, ledgerBalance: Schema.BigInt, drift: Schema.BigInt, confirmed: Schema.Boolean, checkedAt: Schema.DateFromSelf })

/** A disagreement is confirmed when the same block still disagrees this much later (in-flight bookings have landed). */
const CONFIRM_AFTER = Duration.seconds(20)

export class Reconciliation extends Effect.Service<Reconciliation>()("treasury/Reconciliation", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const networks = yield* Networks
    const ledger = yield* Ledger

    /** One network's reconciliation: its chain's treasury balance against its own ledger account. */
    const reconcilerOf = (chain: ChainShape) => {
      const account = networks.treasuryAccount(chain.network)
      const isPrimary = chain === networks.primary
      /** Stored rows name the network; '' is the primary's (rows from before networks). */
      const networkKeys = isPrimary ? [chain.network, ""] : [chain.network]
      const opening = isPrimary ? "treasury_opening" : `treasury_opening:${chain.network}`

      const read = <A>(what: string, f: () => Promise<A>) =>
        Effect.tryPromise({ try: f, catch: (error) => new ChainReadError({ message: `${what}: ${String(error).slice(0, 200)}` }) })

      const chainBalanceAt = (block: bigint) =>
        read("treasury balance", () =>
          chain.publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [chain.treasury], blockNumber: block }))

      const ledgerBalanceAt = (block: bigint) =>
        sql<{ total: string }>`
          SELECT COALESCE(SUM(e.amount), 0)::text AS total FROM ledger_entries e JOIN ledger_transfers t ON t.id = e.transfer_id
          LEFT JOIN chain_reinclusions r ON r.tx_hash = t.tx_hash
          WHERE e.account_id = ${account} AND COALESCE(r.block_number, t.chain_block, 0) <= ${block.toString()}`.pipe(
          Effect.map((r) => BigInt(r[0]?.total ?? "0"))
        )

      /**
       * The ledger's balance and its open items in one snapshot: a payment booked between two separate reads would be
       * counted twice (in flight, then booked) or not at all.
       */
      const bookedAt = (block: bigint) =>
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`
            const ledgerBalance = yield* ledgerBalanceAt(block)
            const unbooked = yield* unbookedStatement(sql, chain, networkKeys)
            return { ledgerBalance, unbooked }
          })
        )

      /**
       * Compares at `block` (default: the last final block, CHAIN_CONFIRMATIONS below the head: what a reorg can still
       * change is not compared yet), money in flight accounted for.
       */
      const check = (at?: bigint) =>
        Effect.gen(function* () {
          const block = at ?? finalBlock(yield* read("block number", () => chain.publicClient.getBlockNumber({ cacheTime: 0 })), chain.confirmations)
          const [chainBalance, booked] = yield* Effect.all([chainBalanceAt(block), Effect.orDie(bookedAt(block))])
          const inFlight = yield* inFlightAt(chain, booked.unbooked, block)
          const result: ReconciliationResult = {
            block,
            chainBalance,
            ledgerBalance: booked.ledgerBalance,
            inFlight,
            drift: chainBalance - booked.ledgerBalance - inFlight.incoming + inFlight.outgoing
          }
          return result
        }).pipe(Effect.withSpan("Reconciliation.check"))

      const store = (r: ReconciliationResult, kind: "opening" | "check", confirmed: boolean) =>
        sql`INSERT INTO treasury_reconciliations ${sql.insert({
          blockNumber: r.block.toString(),
          chainBalance: r.chainBalance.toString(),
          ledgerBalance: r.ledgerBalance.toString(),
          drift: r.drift.toString(),
          kind,
          confirmed,
          network: chain.network
        })}`.pipe(Effect.asVoid, Effect.orDie)

      /**
       * Once per database: whatever the treasury held before this ledger reconciled (a new treasury, or drift from older
       * versions) becomes the opening balance, booked at its block; from then on every difference is drift.
       */
      const open = Effect.gen(function* () {
        if (!isPrimary) yield* ledger.openTreasuryAccount(account, chain.network).pipe(Effect.orDie)
        const opened = yield* sql`SELECT 1 FROM treasury_reconciliations WHERE kind = 'opening' AND network IN ${sql.in(networkKeys)}`.pipe(Effect.orDie)
        if (opened.length > 0) return
        const r = yield* check()
        yield* sql.withTransaction(
          Effect.gen(function* () {
            const inserted = yield* sql`INSERT INTO treasury_reconciliations ${sql.insert({
              blockNumber: r.block.toString(),
              chainBalance: r.chainBalance.toString(),
              ledgerBalance: r.ledgerBalance.toString(),
              drift: r.drift.toString(),
              kind: "opening",
              confirmed: true,
              network: chain.network
            })} ON CONFLICT DO NOTHING RETURNING id`
            if (inserted.length === 0 || r.drift === 0n) return
            yield* ledger.transfer({
              kind: "treasury_opening",
              movements: [r.drift > 0n
                ? { debit: account, credit: opening, amount: r.drift }
                : { debit: opening, credit: account, amount: -r.drift }],
              chainBlock: r.block,
              memo: "treasury balance on chain not explained by the ledger when reconciliation started"
            })
            if (r.ledgerBalance !== 0n) yield* Effect.logWarning(`treasury opening balance absorbs ${r.drift} micro-USDC of earlier drift`)
          })
        ).pipe(Effect.catchTag("LedgerInvariantError", Effect.die), Effect.orDie)
      })

      /** One worker pass: check the latest block; a disagreement is re-checked at the same block later, then confirmed. */
      const pass = Effect.gen(function* () {
        const first = yield* check()
        // The stored checks are the metric: /metrics reads the newest (marketplace_treasury_drift_micro_usdc).
        if (first.drift === 0n) return yield* store(first, "check", false)
        yield* Effect.sleep(CONFIRM_AFTER)
        const again = yield* check(first.block)
        yield* store(again, "check", again.drift !== 0n)
        if (again.drift !== 0n) {
          yield* Effect.logError(`treasury drift on ${chain.network}: chain ${again.chainBalance} vs ledger ${again.ledgerBalance} at block ${again.block} (${again.drift} micro-USDC)`, {
            event: "treasury.drift",
            network: chain.network,
            block: again.block,
            chainBalance: again.chainBalance,
            ledgerBalance: again.ledgerBalance,
            driftMicroUsdc: again.drift
          })
        }
      })

      /** The latest stored check: `/health` shows degraded while a confirmed drift is the newest word. */
      const status = sql`SELECT block_number, chain_balance, ledger_balance, drift, confirmed, checked_at FROM treasury_reconciliations
                         WHERE kind = 'check' AND network IN ${sql.in(networkKeys)} ORDER BY id DESC LIMIT 1`.pipe(
        Effect.flatMap((r) => (r[0] === undefined ? Effect.succeed(Option.none()) : Effect.map(Schema.decodeUnknown(Last)(r[0]), Option.some))),
        Effect.orDie
      )
      return { network: chain.network, check, open, pass, status }
    }

    const reconcilers = networks.all.map(reconcilerOf)
    const primary = reconcilers[0]!
    /** Another network's reconciliation (the primary's for a name not configured). */
    const on = (network: string) => reconcilers.find((r) => r.network === network) ?? primary
    /** At start, every network's opening balance. */
    const open = Effect.forEach(reconcilers, (r) => r.open, { discard: true })
    /** One worker pass per network, side by side (a drift's re-check waits 20 s). */
    const pass = Effect.forEach(reconcilers, (r) => r.pass, { concurrency: "unbounded", discard: true })

    // check and status are the primary's (as before networks); `on(network)` is another's, `all` every one.
    return { check: primary.check, open, pass, status: primary.status, on, all: reconcilers, now: Clock.currentTimeMillis } as const
  }),
  dependencies: [Ledger.Default]
}) {}

/** The lease under which the reconciliation runs: one instance of the cluster checks and alerts (layers/cluster/Leases.ts). */
export const RECONCILIATION_LEASE = "treasury.reconciliation"

/**
 * A pass every 30 s, in the one instance holding the reconciliation's lease (so each drift is logged once per cluster):
 * the treasury's, and the batch-settlement channels' beside it (services/treasury/ChannelReconciliation.ts).
 */
export const ReconciliationWorkerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const reconciliation = yield* Reconciliation
    const channels = yield* ChannelReconciliation
    const leases = yield* Leases
    yield* leases.whileHolding(
      RECONCILIATION_LEASE,
      Effect.all([
        reconciliation.pass.pipe(Effect.catchAllCause((cause) => Effect.logWarning("reconciliation pass failed", cause))),
        channels.pass.pipe(Effect.catchAllCause((cause) => Effect.logWarning("channel reconciliation pass failed", cause)))
      ], { concurrency: 2, discard: true }).pipe(
        Effect.repeat(Schedule.spaced(Duration.seconds(30))),
        Effect.asVoid
      )
    )
  })
)
