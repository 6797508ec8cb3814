// The treasury worker: sends queued refunds and payouts, follows every unfinished treasury transaction to its receipt (rebroadcasting
// the stored bytes), hands each outcome to its purpose, and fills nonce gaps. Leases let several processes share it.
import { Clock, Duration, Effect, Layer, Option, Schedule } from "effect"
import { Deposits } from "../channels/Deposits.js"
import { ChannelClaims } from "../channels/Claims.js"
import { ChannelRefunds } from "../channels/Refunds.js"
import { Payments } from "../payments/Payments.js"
import { UptoSettlements } from "../payments/UptoSettlements.js"
import { Refunds } from "../refunds/Refunds.js"
import { Remainders } from "../remainders/Remainders.js"
import { Withdrawals } from "../withdrawals/Withdrawals.js"
import type { TreasuryTxRow } from "./Repo.js"
import { TreasuryRepo } from "./Repo.js"
import { TREASURY_LEASE_MS, TreasuryWriter } from "./TreasuryWriter.js"
import type { NetworkWriter } from "./networkWriter.js"
import { Reconciliation } from "./Reconciliation.js"
import { TreasuryFinality } from "./Finality.js"

export class TreasuryWorker extends Effect.Service<TreasuryWorker>()("treasury/TreasuryWorker", {
  effect: Effect.gen(function* () {
    const repo = yield* TreasuryRepo
    const writer = yield* TreasuryWriter
    const payments = yield* Payments
    const refunds = yield* Refunds
    const withdrawals = yield* Withdrawals
    const remainders = yield* Remainders
    const deposits = yield* Deposits
    const reconciliation = yield* Reconciliation
    const finality = yield* TreasuryFinality
    const channelClaims = yield* ChannelClaims
    const channelRefunds = yield* ChannelRefunds
    const upto = yield* UptoSettlements

    /** A transaction that books nothing: its outcome is recorded, and that is all. */
    const recordOnly = (name: string) => (tx: TreasuryTxRow) =>
      Effect.flatMap(writer.on(tx.network).observe(tx), (outcome) =>
        outcome._tag === "Pending" ? Effect.void : Effect.asVoid(writer.recordIn(tx.id, outcome)).pipe(Effect.withSpan(name)))

    /** Each purpose's reading of its transaction's outcome (a missing purpose is a type error). */
    const purposes: Record<TreasuryTxRow["purpose"], (tx: TreasuryTxRow) => Effect.Effect<void, unknown>> = {
      settlement: payments.resolveTx,
      settlement_batch: payments.resolveBatchTx,
      refund: refunds.resolveTx,
      withdrawal: withdrawals.resolveTx,
      gap_fill: recordOnly("gap_fill"),
      // A counterfactual account's deployment (services/payments/AccountDeployer.ts): its payment's settlement checks
      // the account's code itself, so the deployment's outcome books nothing.
      account_deploy: recordOnly("account_deploy"),
      // Metered calls' remainders back to their payers, many per transaction (services/remainders).
      remainder_batch: remainders.resolveTx,
      // A payer's deposit into a channel (services/channels/Deposits.ts): its inclusion opens or tops up the channel.
      channel_deposit: deposits.resolveTx,
      // Batch-settlement channels (services/channels): many channels' claims per transaction, the settle of everything
      // claimed, and cooperative refunds.
      channel_claim: channelClaims.resolveTx,
      channel_settle: channelClaims.resolveTx,
      channel_refund: channelRefunds.resolveTx,
      // A metered call's upto settlement (services/payments/UptoSettlements.ts): exactly what the call used.
      upto_settle: upto.resolveTx
    }

    /** Unfinished transactions whose lease ran out (their process died or gave up waiting), lowest nonce first. */
    const followDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* repo.claimDue(now, TREASURY_LEASE_MS, 50).pipe(Effect.orDie)
      // In nonce order: a rebroadcast of a lower nonce unblocks the ones above it.
      for (const tx of due) {
        yield* purposes[tx.purpose](tx).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning(`treasury tx ${tx.id} (${tx.purpose} nonce ${tx.nonce}): will retry after its lease`, cause))
        )
      }
      return due.length
    })

    /**
     * One full pass: send due refunds and payouts, follow in-flight transactions, follow included ones to finality (or
     * send them again after a reorg), repair gaps.
     */
    const processDue = Effect.gen(function* () {
      if (!writer.enabled) return 0
      const sent = (yield* refunds.sendDue) + (yield* withdrawals.sendDue) + (yield* remainders.sendDue)
      const followed = yield* followDue
      const finalized = yield* finality.pass.pipe(Effect.catchAll((e) => Effect.as(Effect.logWarning(`finality pass: ${e.message}`), 0)))
      // Each network's nonce sequence has its own gaps.
      const filled = yield* Effect.reduce(writer.all, 0, (n, w) =>
        w.repairGaps.pipe(
          Effect.catchAll((e) => Effect.as(Effect.logWarning(`gap repair (${w.chain.network}): ${e.message}`), 0)),
          Effect.map((f) => n + f)
        ))
      return sent + followed + finalized + filled
    }).pipe(Effect.withSpan("TreasuryWorker.processDue"))

    /** One network's part of the start (below). */
    const startNetwork = (w: NetworkWriter) => Effect.gen(function* () {
      if (Option.isNone(w.address)) return
      yield* w.syncNonce
      const startedAt = yield* Clock.currentTimeMillis
      const open = yield* repo.unfinishedOf(w.chain.network, w.address.value, 1_000)
      let sent = 0
      for (const tx of open) {
        // A node that refuses (or does not answer) now refuses the rest too: the worker sends them after their leases.
        if (!(yield* w.broadcast(tx, "failures"))) break
        sent++
      }
      const filled = yield* w.repairGaps
      if (open.length > 0 || filled > 0) {
        const ms = (yield* Clock.currentTimeMillis) - startedAt
        yield* Effect.logWarning(
          `treasury at start (${w.chain.network}): ${sent} of ${open.length} unfinished transactions sent again from their stored bytes` +
            (open.length > 0 ? ` (nonces ${open[0]!.nonce}-${open[open.length - 1]!.nonce})` : "") + `, ${filled} nonce gaps filled, in ${ms} ms`
        )
      }
    })

    /**
     * At start, before serving: our nonce row catches up with the chain (fresh database or an older version's
     * transactions); then the stored bytes of every unfinished transaction of our signer are sent again in nonce order,
     * whatever its lease, and nonces with no transaction are filled. A process killed between signing and broadcasting
     * (or a node that lost its pool) otherwise leaves every new transaction waiting behind that nonce until the lease
     * runs out (30 s, then one pass per transaction). The same bytes sent again are harmless: one transaction per nonce.
     * Leases are left alone (a live process may still be waiting for a receipt): booking stays the worker's.
     */
    const start = Effect.gen(function* () {
      if (Option.isNone(writer.address)) return
      // Rows from before networks existed are the primary network's.
      yield* repo.adoptLegacy(writer.chain.network)
      for (const w of writer.all) yield* startNetwork(w)
    }).pipe(Effect.withSpan("TreasuryWorker.start"))

    return { processDue, start, reconcile: reconciliation.check } as const
  }),
  dependencies: [TreasuryRepo.Default, TreasuryWriter.Default, Payments.Default, Refunds.Default, Withdrawals.Default, Remainders.Default, Deposits.Default, Reconciliation.Default, TreasuryFinality.Default,
    ChannelClaims.Default, ChannelRefunds.Default, UptoSettlements.Default]
}) {}

export const TreasuryWorkerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const worker = yield* TreasuryWorker
    yield* worker.processDue.pipe(
      Effect.catchAllCause((cause) => Effect.logError("treasury pass failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.seconds(1))),
      Effect.forkScoped
    )
  })
)
