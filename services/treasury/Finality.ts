// Finality of treasury transactions: an included transaction is booked at once, but counts as final only when
// CHAIN_CONFIRMATIONS blocks hold it. Until then each new head is checked: a transaction still there and deep enough
// is finalized; one a reorg took out is sent again from its stored bytes (same nonce, same authorization: both were
// rolled back with it, so the same bytes do the same thing) and its new block recorded for the reconciliation.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option, Ref } from "effect"
import type { TransactionReceipt } from "viem"
import { isFinal } from "../../layers/confirmations.js"
import { MachineHost } from "../../machines/Host.js"
import { isPersistedSnapshot } from "../../machines/step.js"
import { ChainReadError } from "./chainReads.js"
import { TreasuryRepo, type TreasuryTxRow } from "./Repo.js"
import { TreasuryWriter } from "./TreasuryWriter.js"
import type { NetworkWriter } from "./networkWriter.js"

/** Rows looked at per pass (lowest nonce first: a resent lower nonce unblocks the ones above it). */
const PER_PASS = 200

/** The receipt status the row was booked with (absent: a snapshot from before finality was tracked). */
const bookedSuccess = (row: TreasuryTxRow): boolean | undefined => {
  if (!isPersistedSnapshot(row.machineSnapshot)) return undefined
  const context: unknown = row.machineSnapshot.context
  return typeof context === "object" && context !== null && "success" in context && typeof context.success === "boolean" ? context.success : undefined
}

export class TreasuryFinality extends Effect.Service<TreasuryFinality>()("treasury/TreasuryFinality", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* TreasuryRepo
    const writers = yield* TreasuryWriter
    const host = yield* MachineHost
    /** The head every row was last checked against, per network: nothing changes on chain without a new head. */
    const checkedHeads = new Map<string, Ref.Ref<string | null>>()
    for (const w of writers.all) checkedHeads.set(w.chain.network, yield* Ref.make<string | null>(null))

    /** One network's follower: its chain's head and confirmations, its writer. */
    const follower = (writer: NetworkWriter) => {
      const chain = writer.chain
      const checkedHead = checkedHeads.get(chain.network)!
      const head = Effect.tryPromise({
        try: () => chain.publicClient.getBlock({ blockTag: "latest" }),
        catch: (error) => new ChainReadError({ message: `head: ${String(error).slice(0, 200)}` })
      })

      /** Included (again) somewhere else than booked, or after a reorg: recorded with its new block. */
      const included = (row: TreasuryTxRow, receipt: TransactionReceipt, latest: bigint) =>
        Effect.gen(function* () {
          const at = yield* Clock.currentTimeMillis
          const success = receipt.status === "success"
          yield* sql.withTransaction(Effect.gen(function* () {
            yield* host.deliver("treasury", row.id, {
              type: "MINED", at, success, block: receipt.blockNumber.toString(), final: isFinal(receipt.blockNumber, latest, chain.confirmations)
            })
            yield* repo.reincludedStatement(receipt.transactionHash, receipt.blockNumber)
          }))
          const booked = bookedSuccess(row)
          const ids = { txId: row.id, purpose: row.purpose, subjectId: row.subjectId, nonce: row.nonce.toString(), hash: receipt.transactionHash }
          if (booked !== undefined && booked !== success) {
            // The same bytes did something else this time (the state they ran against changed in the reorg): the booking
            // no longer matches the chain. Not corrected automatically; the reconciliation shows it as drift.
            yield* Effect.logError("treasury transaction included again after a reorg with a different outcome than booked", {
              ...ids, booked: booked ? "success" : "reverted", now: success ? "success" : "reverted", block: receipt.blockNumber.toString()
            })
          } else {
            yield* Effect.logWarning("treasury transaction included again after a reorg", { ...ids, block: receipt.blockNumber.toString(), previousBlock: String(row.blockNumber) })
          }
        })

      /** The chain no longer has the row's transaction: it is sent again (replaced if the fees moved past it). */
      const lost = (row: TreasuryTxRow, latest: bigint) =>
        Effect.gen(function* () {
          if (row.state === "mined") {
            const at = yield* Clock.currentTimeMillis
            yield* host.deliverNow("treasury", row.id, { type: "REORGED", at, block: String(row.blockNumber) })
            yield* Effect.logWarning("treasury transaction taken out by a reorg: sending its stored bytes again", {
              txId: row.id, purpose: row.purpose, subjectId: row.subjectId, nonce: row.nonce.toString(), hash: row.txHash, block: String(row.blockNumber)
            })
          }
          const outcome = yield* writer.observe(row)
          if (outcome._tag === "Mined") return yield* included(row, outcome.receipt, latest)
          if (outcome._tag === "Dropped") {
            yield* writer.recordIn(row.id, outcome).pipe(sql.withTransaction)
            // Booked when it was first included, and now it never can be: the money it booked did not move.
            yield* Effect.logError("treasury transaction reorged out and its nonce went to another transaction: booked but not on chain", {
              txId: row.id, purpose: row.purpose, subjectId: row.subjectId, nonce: row.nonce.toString(), hash: row.txHash
            })
          }
        })

      const step = (row: TreasuryTxRow, latest: bigint) =>
        Effect.gen(function* () {
          const receipt = yield* writer.minedReceipt(row)
          if (Option.isNone(receipt)) return yield* lost(row, latest)
          const r = receipt.value
          if (row.state === "reorged" || row.blockNumber !== r.blockNumber) return yield* included(row, r, latest)
          if (isFinal(r.blockNumber, latest, chain.confirmations)) {
            const at = yield* Clock.currentTimeMillis
            yield* host.deliverNow("treasury", row.id, { type: "FINALIZED", at, block: r.blockNumber.toString() })
          }
        })

      /** One pass over the network's rows not yet final, once per new head; how many rows were looked at. */
      return (rows: ReadonlyArray<TreasuryTxRow>) => Effect.gen(function* () {
        if (rows.length === 0) return 0
        const latest = yield* head
        if (latest.hash !== null && (yield* Ref.get(checkedHead)) === latest.hash) return 0
        let failed = false
        for (const row of rows) {
          yield* step(row, latest.number ?? 0n).pipe(
            Effect.catchAll((e) => {
              failed = true
              return Effect.logWarning(`finality of treasury tx ${row.id}: will look again at the next head`, { error: "message" in e ? e.message : String(e) })
            })
          )
        }
        // A row that could not be checked is checked again even if no new block comes.
        if (!failed) yield* Ref.set(checkedHead, latest.hash)
        return rows.length
      })
    }
    const followers = writers.all.map((w) => ({ network: w.chain.network, follow: follower(w) }))

    /** One pass over the rows not yet final, each network against its own head. */
    const pass = Effect.gen(function* () {
      const rows = yield* repo.notFinal(PER_PASS).pipe(Effect.orDie)
      if (rows.length === 0) return 0
      let looked = 0
      for (const f of followers) {
        looked += yield* f.follow(rows.filter((row) => writers.on(row.network).chain.network === f.network))
      }
      return looked
    }).pipe(Effect.withSpan("TreasuryFinality.pass"))

    return { pass } as const
  }),
  dependencies: [TreasuryRepo.Default, TreasuryWriter.Default, MachineHost.Default]
}) {}
