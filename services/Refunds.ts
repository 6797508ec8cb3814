// On-chain refunds of held payments: the transfer is signed and stored before it is broadcast, so it is sent at most once and never lost.
import { SqlClient } from "@effect/sql"
import { Clock, Data, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import { encodeFunctionData, getAddress, type Hex, keccak256 } from "viem"
import { Chain } from "../layers/Chain.js"
import { usdcAbi } from "../layers/devnet/usdcAbi.js"
import { newId } from "../src/domain/Ids.js"

const RefundRow = Schema.Struct({
  id: Schema.String,
  executionId: Schema.String,
  toAddress: Schema.String,
  amount: Schema.BigInt,
  status: Schema.Literal("pending", "submitted", "confirmed", "failed"),
  txHash: Schema.NullOr(Schema.String),
  rawTx: Schema.NullOr(Schema.String),
  attempts: Schema.Number
})
type RefundRow = typeof RefundRow.Type

export class RefundError extends Data.TaggedError("RefundError")<{ readonly message: string }> {}

/** Gas for one USDC transfer; fixed to skip an estimate round trip. */
const TRANSFER_GAS = 100_000n
const LEASE_MS = 60_000

/** Called in the transaction that confirms a refund (the execution machine's REFUND_CONFIRMED). */
export type RefundConfirmed = (executionId: string, txHash: string) => Effect.Effect<void, unknown>

export class Refunds extends Effect.Service<Refunds>()("Refunds", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    let onConfirmed: RefundConfirmed = () => Effect.void

    /** Queues a refund; call inside the transaction that moves the money to refunds payable. */
    const create = (input: { readonly executionId: string; readonly paymentId: string; readonly to: string; readonly amount: bigint }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`INSERT INTO refunds ${sql.insert({
          id: newId("rfd"),
          executionId: input.executionId,
          paymentId: input.paymentId,
          toAddress: input.to,
          amount: input.amount.toString(),
          status: "pending",
          nextAttemptAt: new Date(now)
        })} ON CONFLICT (execution_id) DO NOTHING`).pipe(Effect.asVoid)

    const setConfirmedHandler = (handler: RefundConfirmed) => Effect.sync(() => void (onConfirmed = handler))

    /** Signs the transfer with the treasury key; the bytes and hash are stored before anything is broadcast. */
    const sign = (row: RefundRow) =>
      Effect.gen(function* () {
        const signer = yield* Effect.mapError(chain.signer, () => new RefundError({ message: "no settlement signer configured for refunds" }))
        const request = yield* Effect.tryPromise({
          try: () =>
            signer.walletClient.prepareTransactionRequest({
              account: signer.account,
              chain: signer.walletClient.chain,
              to: chain.usdc.address,
              data: encodeFunctionData({ abi: usdcAbi, functionName: "transfer", args: [getAddress(row.toAddress), row.amount] }),
              gas: TRANSFER_GAS
            }),
          catch: (error) => new RefundError({ message: `preparing the refund failed: ${String(error)}` })
        })
        const raw = yield* Effect.tryPromise({
          try: () => signer.walletClient.signTransaction(request),
          catch: (error) => new RefundError({ message: `signing the refund failed: ${String(error)}` })
        })
        const hash = keccak256(raw)
        yield* sql`UPDATE refunds SET status = 'submitted', raw_tx = ${raw}, tx_hash = ${hash} WHERE id = ${row.id} AND status = 'pending'`
        return { raw, hash }
      })

    const receiptOf = (hash: Hex) =>
      Effect.tryPromise({
        try: () => chain.publicClient.getTransactionReceipt({ hash }).then((r) => Option.some(r), () => Option.none()),
        catch: (error) => new RefundError({ message: String(error) })
      })

    const confirm = (row: RefundRow, hash: Hex) =>
      sql.withTransaction(
        Effect.gen(function* () {
          const updated = yield* sql`UPDATE refunds SET status = 'confirmed', confirmed_at = now() WHERE id = ${row.id} AND status <> 'confirmed' RETURNING id`
          if (updated.length > 0) yield* onConfirmed(row.executionId, hash)
        })
      )

    /** Drives one refund forward: sign + store, broadcast (again), read the receipt, confirm. Safe to repeat. */
    const advance = (row: RefundRow) =>
      Effect.gen(function* () {
        const { hash, raw } = row.status === "pending" || row.rawTx === null || row.txHash === null
          ? yield* sign(row)
          : { raw: row.rawTx as Hex, hash: row.txHash as Hex }
        const existing = yield* receiptOf(hash)
        if (Option.isNone(existing)) {
          // Re-broadcasting the same signed bytes is harmless: the chain accepts one transaction per nonce.
          yield* Effect.tryPromise(() => chain.publicClient.sendRawTransaction({ serializedTransaction: raw })).pipe(
            Effect.catchAll((error) => Effect.logDebug(`refund ${row.id} broadcast: ${String(error)}`))
          )
        }
        const receipt = yield* Effect.tryPromise({
          try: () => chain.publicClient.waitForTransactionReceipt({ hash, timeout: 60_000 }),
          catch: (error) => new RefundError({ message: `no receipt yet for refund ${hash}: ${String(error)}` })
        })
        if (receipt.status !== "success") {
          yield* sql`UPDATE refunds SET status = 'failed', last_error = 'transfer reverted' WHERE id = ${row.id}`
          return yield* new RefundError({ message: `refund ${hash} reverted; an operator must resolve it` })
        }
        yield* confirm(row, hash)
      }).pipe(Effect.withSpan("Refunds.advance"))

    /** One pass of the refund worker over due refunds (lease-based, shared by processes). */
    const processDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql`
        UPDATE refunds SET next_attempt_at = ${new Date(now + LEASE_MS)}, attempts = attempts + 1
        WHERE id IN (SELECT id FROM refunds WHERE status IN ('pending', 'submitted') AND next_attempt_at <= ${new Date(now)}
                     ORDER BY next_attempt_at LIMIT 20 FOR UPDATE SKIP LOCKED)
        RETURNING *`.pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(RefundRow))), Effect.orDie)
      yield* Effect.forEach(
        due,
        (row) =>
          advance(row).pipe(
            Effect.catchAll((error) =>
              sql`UPDATE refunds SET last_error = ${(error instanceof Error ? error.message : String(error)).slice(0, 500)} WHERE id = ${row.id}`
                .pipe(Effect.ignore)
            ),
            Effect.catchAllCause((cause) => Effect.logError(`refund ${row.id} failed; retried after its lease`, cause))
          ),
        { concurrency: 4, discard: true }
      )
      return due.length
    }).pipe(Effect.withSpan("Refunds.processDue"))

    return { create, processDue, setConfirmedHandler } as const
  })
}) {}

export const RefundsWorkerLive = Layer.scopedDiscard(
  Effect.flatMap(Refunds, (refunds) =>
    refunds.processDue.pipe(
      Effect.catchAllCause((cause) => Effect.logError("refund pass failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.seconds(1))),
      Effect.forkScoped
    ))
)
