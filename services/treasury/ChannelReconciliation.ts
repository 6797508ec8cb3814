// The reconciliation of batch-settlement channels, per network where channels exist, at the network's last final block
// (docs/operators.md "Reconciling channels"): the ledger's channel receivable against the rows, each live channel's
// row against the contract's channels(id), and the contract's claimed-unsettled pool for our treasury against the rows.
// Runs in the reconciliation worker's pass (services/treasury/Reconciliation.ts), under the same lease.
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Schema } from "effect"
import type { ChainShape } from "../../layers/Chain.js"
import { Networks } from "../../layers/Networks.js"
import { finalBlock } from "../../layers/confirmations.js"
import { Accounts } from "../ledger/Ledger.js"
import { rowsOf } from "../sql/Rows.js"
import { channelStatesAt } from "./channelChainReads.js"
import { type ChannelComparison, compareChannels, driftSums, pendingDrift, rowsPending, sameDrift } from "./channelDrift.js"
import { ChainReadError } from "./chainReads.js"

export interface ChannelReconciliationResult {
  readonly network: string
  readonly block: bigint
  /** (a) The ledger's channel_receivable and Σ(charged − settled) over every channel (one account for all networks). */
  readonly ledgerReceivable: bigint
  readonly rowsReceivable: bigint
  readonly receivableDrift: bigint
  /** (b) Each live channel's row against channels(id) at the block. */
  readonly channels: ChannelComparison
  /** (c) receivers(treasury, USDC): totalClaimed − totalSettled, against Σ(claimed − settled) less claims in flight. */
  readonly chainPending: bigint
  readonly rowsPending: bigint
  readonly pendingDrift: bigint
}

export const drifts = (r: ChannelReconciliationResult) => r.receivableDrift !== 0n || r.channels.drifted.length > 0 || r.pendingDrift !== 0n

const Mirror = Schema.Struct({
  id: Schema.String,
  balance: Schema.BigInt,
  chargedCumulative: Schema.BigInt,
  claimedCumulative: Schema.BigInt,
  settledCumulative: Schema.BigInt
})
const mirrors = rowsOf(Mirror)

export const StoredCheck = Schema.Struct({
  network: Schema.String,
  blockNumber: Schema.BigInt,
  ledgerReceivable: Schema.BigInt,
  rowsReceivable: Schema.BigInt,
  receivableDrift: Schema.BigInt,
  channelsChecked: Schema.Number,
  channelsDrifted: Schema.Number,
  balanceDrift: Schema.BigInt,
  claimedDrift: Schema.BigInt,
  claimsInFlight: Schema.BigInt,
  chainPending: Schema.BigInt,
  rowsPending: Schema.BigInt,
  pendingDrift: Schema.BigInt,
  drifted: Schema.Unknown,
  confirmed: Schema.Boolean,
  checkedAt: Schema.DateFromSelf
})
export type StoredCheck = typeof StoredCheck.Type
const stored = rowsOf(StoredCheck)

/** A disagreement is confirmed when a later check (a later final block, bookings landed) still shows it. */
const CONFIRM_AFTER = Duration.seconds(20)
/** How many drifted channels a stored check names. */
const NAMED = 20

export class ChannelReconciliation extends Effect.Service<ChannelReconciliation>()("treasury/ChannelReconciliation", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const networks = yield* Networks

    /** One snapshot: the ledger account, the rows' receivable and the network's live rows (a charge lands in all or none). */
    const booked = (network: string) =>
      sql.withTransaction(Effect.gen(function* () {
        yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`
        const [ledger] = yield* sql<{ total: string }>`SELECT COALESCE(SUM(amount), 0)::text AS total FROM ledger_entries WHERE account_id = ${Accounts.channelReceivable}`
        const [receivable] = yield* sql<{ total: string }>`SELECT COALESCE(SUM(charged_cumulative - settled_cumulative), 0)::text AS total FROM channels`
        // Live: everything not closed or never opened, and any channel whose claims wait for their settle.
        const live = yield* mirrors(sql`SELECT id, balance, charged_cumulative, claimed_cumulative, settled_cumulative FROM channels
          WHERE network = ${network} AND (status NOT IN ('closed', 'depositFailed') OR claimed_cumulative <> settled_cumulative)`)
        return { ledgerReceivable: BigInt(ledger?.total ?? "0"), rowsReceivable: BigInt(receivable?.total ?? "0"), live }
      })).pipe(Effect.orDie)

    /** One network's check at `at` (default: its last final block). */
    const checkOn = (chain: ChainShape, at?: bigint) =>
      Effect.gen(function* () {
        const block = at ?? finalBlock(yield* Effect.tryPromise({
          try: () => chain.publicClient.getBlockNumber({ cacheTime: 0 }),
          catch: (e) => new ChainReadError({ message: `block number: ${String(e).slice(0, 200)}` })
        }), chain.confirmations)
        const rows = yield* booked(chain.network)
        const onChain = yield* channelStatesAt(chain, rows.live.map((r) => r.id), block)
        const channels = compareChannels(rows.live, onChain.channels)
        const chainPending = onChain.totalClaimed - onChain.totalSettled
        const ours = rowsPending(rows.live)
        const result: ChannelReconciliationResult = {
          network: chain.network,
          block,
          ledgerReceivable: rows.ledgerReceivable,
          rowsReceivable: rows.rowsReceivable,
          receivableDrift: rows.ledgerReceivable - rows.rowsReceivable,
          channels,
          chainPending,
          rowsPending: ours,
          pendingDrift: pendingDrift(chainPending, ours, channels.claimsInFlight)
        }
        return result
      }).pipe(Effect.withSpan("ChannelReconciliation.check", { attributes: { network: chain.network } }))

    /** The networks with channel rows (a network without any has nothing to reconcile). */
    const withChannels = Effect.filter(networks.all, (chain) =>
      Effect.map(sql<{ any: boolean }>`SELECT EXISTS (SELECT 1 FROM channels WHERE network = ${chain.network}) AS any`, (r) => r[0]?.any === true).pipe(Effect.orDie))

    /** Every network with channels, checked now (the operator endpoint). */
    const check = Effect.flatMap(withChannels, (chains) => Effect.forEach(chains, (chain) => checkOn(chain), { concurrency: "unbounded" }))

    const store = (r: ChannelReconciliationResult, confirmed: boolean) =>
      sql`INSERT INTO channel_reconciliations ${sql.insert({
        network: r.network,
        blockNumber: r.block.toString(),
        ledgerReceivable: r.ledgerReceivable.toString(),
        rowsReceivable: r.rowsReceivable.toString(),
        receivableDrift: r.receivableDrift.toString(),
        channelsChecked: r.channels.checked,
        channelsDrifted: r.channels.drifted.length,
        balanceDrift: r.channels.balanceDrift.toString(),
        claimedDrift: r.channels.claimedDrift.toString(),
        claimsInFlight: r.channels.claimsInFlight.toString(),
        chainPending: r.chainPending.toString(),
        rowsPending: r.rowsPending.toString(),
        pendingDrift: r.pendingDrift.toString(),
        drifted: JSON.stringify(r.channels.drifted.slice(0, NAMED).map((d) => ({
          channelId: d.channelId,
          balance: d.balance.toString(),
          chainBalance: d.chainBalance.toString(),
          claimedCumulative: d.claimedCumulative.toString(),
          chainTotalClaimed: d.chainTotalClaimed.toString()
        }))),
        confirmed
      })}`.pipe(Effect.asVoid, Effect.orDie)

    /** One network's worker pass: a disagreement is checked again later (at a later final block) before it is confirmed. */
    const passOn = (chain: ChainShape) =>
      Effect.gen(function* () {
        const first = yield* checkOn(chain)
        if (!drifts(first)) return yield* store(first, false)
        yield* Effect.sleep(CONFIRM_AFTER)
        const again = yield* checkOn(chain)
        const stillDrifted = sameDrift(first.channels, again.channels)
        // A lagging mirror moves on between the checks; only what disagreed the same way twice is confirmed.
        const result: ChannelReconciliationResult = { ...again, channels: { ...again.channels, drifted: stillDrifted, ...driftSums(stillDrifted) } }
        const confirmed = (first.receivableDrift !== 0n && again.receivableDrift !== 0n) || stillDrifted.length > 0 ||
          (first.pendingDrift !== 0n && again.pendingDrift !== 0n)
        yield* store(confirmed ? result : again, confirmed)
        if (confirmed) {
          yield* Effect.logError(
            `channel drift on ${chain.network} at block ${again.block}: receivable ledger ${again.ledgerReceivable} vs rows ${again.rowsReceivable}; ` +
              `${stillDrifted.length} channel(s) differ from the contract; claimed-unsettled chain ${again.chainPending} vs rows ${again.rowsPending} (${again.channels.claimsInFlight} in flight)`,
            {
              event: "channels.drift",
              network: chain.network,
              block: again.block,
              receivableDriftMicroUsdc: again.receivableDrift,
              channelsDrifted: stillDrifted.length,
              balanceDriftMicroUsdc: again.channels.balanceDrift,
              claimedDriftMicroUsdc: again.channels.claimedDrift,
              pendingDriftMicroUsdc: again.pendingDrift
            }
          )
        }
      })

    /** The reconciliation worker's pass over every network with channels, side by side. */
    const pass = Effect.flatMap(withChannels, (chains) => Effect.forEach(chains, passOn, { concurrency: "unbounded", discard: true }))

    /** The newest stored check of each network (what /health and /metrics read). */
    const status = stored(sql`SELECT DISTINCT ON (network) network, block_number, ledger_receivable, rows_receivable, receivable_drift,
        channels_checked, channels_drifted, balance_drift, claimed_drift, claims_in_flight, chain_pending, rows_pending, pending_drift,
        drifted, confirmed, checked_at FROM channel_reconciliations ORDER BY network, id DESC`).pipe(Effect.orDie)

    return { check, checkOn, pass, status } as const
  })
}) {}

/** A stored check disagrees, confirmed: /health shows degraded while it is a network's newest word. */
export const confirmedDrift = (s: StoredCheck) =>
  s.confirmed && (s.receivableDrift !== 0n || s.channelsDrifted > 0 || s.pendingDrift !== 0n)
