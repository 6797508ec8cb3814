// On-chain refunds of held payments, sent through the treasury writer and confirmed only when the receipt's Transfer
// log pays that refund's recipient that refund's amount; the ledger's treasury moves in the same transaction.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { encodeFunctionData, getAddress } from "viem"
import { Networks } from "../../layers/Networks.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { MachineHost } from "../../machines/Host.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { movedExactly } from "../treasury/chainReads.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"

const RefundRow = Schema.Struct({
  id: Schema.String,
  /** The execution refunded, or (for a chain's unspent budget) none and `chainId`. */
  executionId: Schema.NullOr(Schema.String),
  chainId: Schema.NullOr(Schema.String),
  toAddress: Schema.String,
  amount: Schema.BigInt,
  status: Schema.Literal("pending", "submitted", "confirmed", "failed"),
  txHash: Schema.NullOr(Schema.String),
  treasuryTxId: Schema.NullOr(Schema.String),
  attempts: Schema.Number,
  /** The network it goes back on: its payment's (set when first sent); NULL is the primary. */
  network: Schema.NullOr(Schema.String)
})
type RefundRow = typeof RefundRow.Type
const decodeRows = Schema.decodeUnknown(Schema.Array(RefundRow))

/** Gas for one USDC transfer; fixed to skip an estimate round trip. */
const TRANSFER_GAS = 100_000n
const LEASE_MS = 60_000
/** A reverted refund (the treasury short of USDC) is sent again after this long. */
const REVERTED_RETRY_MS = 60_000

/** The ids and amount of a refund's log lines (a dispute's payout and a chain's remainder are refunds too). */
const refundFields = (refund: RefundRow, txId: string) => ({
  refundId: refund.id,
  executionId: refund.executionId,
  chainId: refund.chainId,
  treasuryTxId: txId,
  to: refund.toAddress,
  amountMicroUsdc: refund.amount
})

export class Refunds extends Effect.Service<Refunds>()("refunds/Refunds", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const networks = yield* Networks
    const writers = yield* TreasuryWriter
    const ledger = yield* Ledger
    const host = yield* MachineHost
    const rows = (effect: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) => Effect.flatMap(effect, (r) => Effect.orDie(decodeRows(r)))

    /** Records what the chain said about a refund's transaction, with the booking it causes, in one transaction. */
    const record = (refund: RefundRow, txId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>) =>
      sql.withTransaction(
        Effect.gen(function* () {
          const writer = writers.on(refund.network)
          const chain = writer.chain
          yield* writer.recordIn(txId, outcome)
          const at = yield* Clock.currentTimeMillis
          const paid = outcome._tag === "Mined" && outcome.receipt.status === "success" &&
            movedExactly(chain, outcome.receipt, chain.treasury, refund.toAddress, refund.amount)
          if (!paid) {
            // Reverted (the treasury was short) or its nonce went to another transaction: nothing left; send it again.
            yield* Effect.logWarning(`refund ${refund.id} not paid (${outcome._tag === "Dropped" ? "dropped" : "reverted"}): sent again`, {
              ...refundFields(refund, txId),
              event: "refund.failed",
              cause: outcome._tag === "Dropped" ? "transaction dropped" : "transfer reverted or did not pay the refund"
            })
            yield* sql`UPDATE refunds SET status = 'pending', treasury_tx_id = NULL, tx_hash = NULL,
                       last_error = ${outcome._tag === "Dropped" ? "transaction dropped" : "transfer reverted or did not pay the refund"},
                       next_attempt_at = ${new Date(at + (outcome._tag === "Dropped" ? 0 : REVERTED_RETRY_MS))}
                       WHERE id = ${refund.id} AND status = 'submitted' AND treasury_tx_id = ${txId}`
            return
          }
          const hash = outcome.receipt.transactionHash
          const updated = yield* sql`UPDATE refunds SET status = 'confirmed', tx_hash = ${hash}, block_number = ${outcome.receipt.blockNumber.toString()},
                                       confirmed_at = now() WHERE id = ${refund.id} AND status = 'submitted' AND treasury_tx_id = ${txId} RETURNING id`
          if (updated.length === 0) return
          yield* Effect.logInfo(`refund ${refund.id} confirmed: ${refund.amount} micro-USDC to ${refund.toAddress} in ${hash}`, {
            ...refundFields(refund, txId),
            event: "refund.confirmed",
            txHash: hash,
            block: outcome.receipt.blockNumber
          })
          // The refund left the treasury on chain: refunds payable is settled, in the block it was mined.
          yield* ledger.transfer({
            kind: "refund_sent",
            movements: [{ debit: Accounts.refundsPayable, credit: networks.treasuryAccount(refund.network), amount: refund.amount }],
            subjectId: refund.executionId ?? refund.chainId ?? refund.id,
            chainBlock: outcome.receipt.blockNumber,
            txHash: hash
          }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
          // A chain's refund has no machine to tell: its row (joined by the chain's views) is the record.
          if (refund.executionId !== null) {
            yield* host.deliver("execution", refund.executionId, { type: "REFUND_CONFIRMED", at, txHash: hash, amount: refund.amount.toString() })
          }
        })
      )

    /** Signs and sends a pending refund (one nonce, stored first), then waits for its receipt. */
    const send = (refund: RefundRow) =>
      Effect.gen(function* () {
        // Back on the payment's network, from the same treasury key.
        const writer = writers.on(refund.network)
        const chain = writer.chain
        const tx = yield* writer.submit({
          purpose: "refund",
          subjectId: refund.id,
          to: chain.usdc.address,
          data: encodeFunctionData({ abi: usdcAbi, functionName: "transfer", args: [getAddress(refund.toAddress), refund.amount] }),
          gas: TRANSFER_GAS,
          logFields: { refundId: refund.id, executionId: refund.executionId, chainId: refund.chainId, to: refund.toAddress, amountMicroUsdc: refund.amount },
          link: (txId) =>
            sql`UPDATE refunds SET status = 'submitted', treasury_tx_id = ${txId}, last_error = NULL WHERE id = ${refund.id} AND status = 'pending'`
              .pipe(Effect.asVoid)
        })
        const receipt = yield* writer.awaitReceipt(tx)
        if (Option.isSome(receipt)) yield* record({ ...refund, status: "submitted" }, tx.id, { _tag: "Mined", receipt: receipt.value })
      })

    /** The treasury worker found a refund transaction's fate: record it. */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const writer = writers.on(tx.network)
        const outcome = yield* writer.observe(tx)
        if (outcome._tag === "Pending") return
        const refund = yield* rows(sql`SELECT * FROM refunds WHERE id = ${tx.subjectId}`)
        const row = refund[0]
        if (row === undefined || row.treasuryTxId !== tx.id) return yield* sql.withTransaction(writer.recordIn(tx.id, outcome))
        yield* record(row, tx.id, outcome)
      })

    /** One pass: pending refunds are sent (lease-based, shared by processes); in-flight ones are the treasury worker's. */
    const sendDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* rows(sql`
        UPDATE refunds SET next_attempt_at = ${new Date(now + LEASE_MS)}, attempts = attempts + 1,
          network = COALESCE(refunds.network, (SELECT p.network FROM payments p WHERE p.id = refunds.payment_id))
        WHERE id IN (SELECT id FROM refunds WHERE status = 'pending' AND next_attempt_at <= ${new Date(now)}
                     ORDER BY next_attempt_at LIMIT 20 FOR UPDATE SKIP LOCKED)
        RETURNING *`).pipe(Effect.orDie)
      yield* Effect.forEach(
        due,
        (row) =>
          send(row).pipe(
            Effect.catchAll((error) =>
              sql`UPDATE refunds SET last_error = ${error.message.slice(0, 500)} WHERE id = ${row.id}`.pipe(Effect.orDie)),
            Effect.catchAllCause((cause) => Effect.logError(`refund ${row.id} failed; retried after its lease`, cause))
          ),
        { concurrency: 8, discard: true }
      )
      return due.length
    }).pipe(Effect.withSpan("Refunds.sendDue"))

    return { resolveTx, sendDue } as const
  }),
  dependencies: [TreasuryWriter.Default, Ledger.Default, MachineHost.Default]
}) {}

export const REFUND_SEND_INTERVAL = Duration.seconds(1)
export const RefundsWorkerLive = Layer.scopedDiscard(
  Effect.flatMap(Refunds, (refunds) =>
    refunds.sendDue.pipe(
      Effect.catchAllCause((cause) => Effect.logError("refund pass failed", cause)),
      Effect.repeat(Schedule.spaced(REFUND_SEND_INTERVAL)),
      Effect.forkScoped
    ))
)
