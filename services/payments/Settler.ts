// Sends settlements as treasury transactions. With a SettlementBatcher, settlements are group-committed: an idle settler
// sends a payment at once (alone: a plain transferWithAuthorization); while a transaction is in flight the next payments
// wait and go together, as one batch, when it is mined (a full batch goes out beside the one in flight; on an RPC a
// partial one too, after a short linger, so that it lands in the same block). Without a
// batcher, one transaction per payment, concurrently. A smart account's signature that is not 65 bytes (or is an
// ERC-6492 one) goes alone too, through the token's bytes overload: the batcher's items carry (v, r, s) only.
import { SqlClient } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Cause, Config, Deferred, Effect, FiberSet, Option } from "effect"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { settlesAsVrs } from "../../layers/x402/smartAccount.js"
import { newId } from "../../src/domain/Ids.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import type { NetworkWriter } from "../treasury/networkWriter.js"
import { batchCalldata, batchGas, paidInBatch, singleCalldata } from "./chainOutcome.js"
import * as GroupCommit from "../sql/GroupCommit.js"
import { PaymentsRepo } from "./Repo.js"

/** Gas for one transferWithAuthorization; set explicitly to skip an estimate round trip per settlement. */
const SETTLEMENT_GAS = 150_000n
/** The same through a smart account's ERC-1271 check (its own verification logic runs inside the token's). */
const SMART_ACCOUNT_SETTLEMENT_GAS = 300_000n

/**
 * Batch transactions in flight at once from the treasury: the second one only for a full batch (consecutive nonces; the
 * chain mines them in order). Under a backlog this overlaps one batch's signing and storing with the other's mining.
 */
const MAX_IN_FLIGHT = 2

/**
 * On a chain whose blocks take seconds (an RPC), a partial batch that waited for the transaction in flight would miss
 * the block that one lands in: every wave of calls would take two blocks (measured at 12 s blocks, c=32: 1.99 block
 * times at p50 against 1.02 one by one; docs/performance.md). There a partial batch goes beside the ones in flight once
 * its first payment waited this long, up to RPC_MAX_IN_FLIGHT transactions (consecutive nonces, mined in order).
 */
const RPC_BATCH_LINGER_MS = 150
const RPC_MAX_IN_FLIGHT = 6

/** What became of a payment handed to the settler. */
export type Sent =
  /** Sent alone: the caller records the transaction's outcome with the payment's. */
  | { readonly _tag: "Single"; readonly txId: string; readonly outcome: TxOutcome }
  /** Sent in a batch (recorded once by the settler or the treasury worker); `paid`: the receipt shows this payment paid. */
  | { readonly _tag: "Batch"; readonly txId: string; readonly outcome: TxOutcome; readonly paid: boolean }
  /** Not sent, or sent and then interrupted: a payment linked to a stored transaction is finished by the workers. */
  | { readonly _tag: "NotSent"; readonly message: string }

interface Waiting {
  readonly paymentId: string
  readonly payment: VerifiedPayment
  readonly done: Deferred.Deferred<Sent>
}

const notSent = (message: string): Sent => ({ _tag: "NotSent", message })

/** SETTLEMENT_BATCH_MAX: the most payments in one batch transaction (gas: ≈ 40,000 each, a limit of 135,000 each); 1 = one by one. */
const batchMax = Config.integer("SETTLEMENT_BATCH_MAX").pipe(
  Config.withDefault(100),
  Config.validate({ message: "SETTLEMENT_BATCH_MAX must be between 1 and 200", validation: (n) => n >= 1 && n <= 200 })
)

export class Settler extends Effect.Service<Settler>()("payments/Settler", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const writers = yield* TreasuryWriter
    const repo = yield* PaymentsRepo
    const maxBatch = yield* batchMax

    /** One network's settler: its writer (own nonce row), its batcher, its own group commit. */
    const settlerOn = (writer: NetworkWriter) => Effect.gen(function* () {
      const chain = writer.chain
      const batcher = writer.enabled && maxBatch > 1 ? chain.batcher : Option.none()
      /** The settler is the only one waiting for a batch's receipt: on a devnet (a block per transaction) it asks often. */
      const receiptPollMs = chain.mode === "devnet" ? 5 : undefined

      /** Batch receipts being recorded (interrupted when the service stops: the treasury worker records them). */
      const recordings = yield* FiberSet.make()

      /** `pollMs`: set when the caller is the group commit's loop, the only one waiting for a receipt. */
      const sendOne = (paymentId: string, p: VerifiedPayment, pollMs?: number): Effect.Effect<Sent> =>
        Effect.gen(function* () {
          const tx = yield* writer.submit({
            purpose: "settlement",
            subjectId: paymentId,
            to: chain.usdc.address,
            data: singleCalldata(p),
            gas: settlesAsVrs(p.signature) ? SETTLEMENT_GAS : SMART_ACCOUNT_SETTLEMENT_GAS,
            linkStatement: (txId) => repo.linkTreasuryTx(paymentId, txId)
          }, true)
          // The send answered with the receipt (eth_sendRawTransactionSync), or it is awaited.
          const receipt = Option.isSome(tx.receipt) ? tx.receipt : yield* writer.awaitReceipt(tx, undefined, pollMs)
          const outcome: TxOutcome = Option.match(receipt, { onNone: () => ({ _tag: "Pending" }), onSome: (r) => ({ _tag: "Mined", receipt: r }) })
          return { _tag: "Single", txId: tx.id, outcome } satisfies Sent
        }).pipe(
          // Nothing was stored (the nonce and the row roll back together), or the stored transaction is the worker's now.
          Effect.catchTags({ TreasuryError: (e) => Effect.succeed(notSent(e.message)), SqlError: (e) => Effect.succeed(notSent(`database: ${e.message}`)) }),
          withSpan("Settler.sendOne")
        )

      /** One batch transaction for the group; the payments are linked to it in the database transaction that stores it. */
      const sendBatch = (address: `0x${string}`, group: ReadonlyArray<Waiting>): Effect.Effect<ReadonlyArray<Sent>> =>
        Effect.gen(function* () {
          const payments = group.map((w) => w.payment)
          const tx = yield* writer.submit({
            purpose: "settlement_batch",
            subjectId: newId("batch"),
            to: address,
            data: batchCalldata(chain.usdc.address, payments),
            gas: batchGas(group.length),
            linkStatement: (txId) => repo.linkTreasuryTxMany(group.map((w) => w.paymentId), txId)
          }, true)
          const receipt = Option.isSome(tx.receipt) ? tx.receipt : yield* writer.awaitReceipt(tx, undefined, receiptPollMs)
          if (Option.isNone(receipt)) return group.map((): Sent => ({ _tag: "Batch", txId: tx.id, outcome: { _tag: "Pending" }, paid: false }))
          const outcome: TxOutcome = { _tag: "Mined", receipt: receipt.value }
          // The batch transaction is recorded once, beside the next batch (not in its way); should this fail, the
          // treasury worker records it after its lease. Its payments are recorded by their callers.
          yield* FiberSet.run(recordings, sql.withTransaction(writer.recordIn(tx.id, outcome)).pipe(
            Effect.catchAll((e) => Effect.logWarning(`settlement batch ${tx.id}: recording its receipt failed, the treasury worker will: ${e.message}`))
          ))
          const paid = paidInBatch(chain, address, receipt.value, payments)
          return group.map((_, i): Sent => ({ _tag: "Batch", txId: tx.id, outcome, paid: paid[i] === true }))
        }).pipe(
          Effect.catchTags({
            TreasuryError: (e) => Effect.succeed(group.map(() => notSent(e.message))),
            SqlError: (e) => Effect.succeed(group.map(() => notSent(`database: ${e.message}`)))
          }),
          withSpan("Settler.sendBatch", { attributes: { size: group.length } })
        )

      const release = (group: ReadonlyArray<Waiting>, sent: (i: number) => Sent) =>
        Effect.forEach(group, (w, i) => Deferred.succeed(w.done, sent(i)), { discard: true })
      const stopping = notSent("the service is stopping; the recovery workers finish this settlement")

      /** One group's transaction (alone when it holds one payment), its payments released with what became of them. */
      const settleGroup = (address: `0x${string}`, group: ReadonlyArray<Waiting>) =>
        Effect.gen(function* () {
          const [first] = group
          const sent = group.length === 1 && first !== undefined
            ? [yield* sendOne(first.paymentId, first.payment, receiptPollMs)]
            : yield* sendBatch(address, group)
          yield* release(group, (i) => sent[i] ?? notSent("no result for this payment"))
        }).pipe(
          // A defect here is a crash at some step (tests inject them): whatever was stored is the workers' to finish.
          Effect.catchAllCause((cause) =>
            Effect.zipRight(
              Effect.logError(`settlement of ${group.length} payment(s) interrupted; the recovery workers finish it`, cause),
              release(group, () => notSent(`the settlement was interrupted: ${String(Cause.squash(cause))}`.slice(0, 300)))
            )),
          Effect.onInterrupt(() => release(group, () => stopping))
        )

      /**
       * The group commit (with a batcher): a full batch goes out beside the transaction in flight (at most MAX_IN_FLIGHT;
       * a full batch gains nothing by waiting), a partial one fills up behind it.
       */
      const commits = Option.isNone(batcher) ? Option.none() : Option.some(yield* GroupCommit.make<Waiting>({
        maxGroup: maxBatch,
        // A devnet mines each transaction at once: waiting for the one in flight costs milliseconds and fills batches.
        ...(chain.mode === "rpc" ? { maxInFlight: RPC_MAX_IN_FLIGHT, lingerMs: RPC_BATCH_LINGER_MS } : { maxInFlight: MAX_IN_FLIGHT }),
        run: (group) => settleGroup(batcher.value, group),
        onStop: (left) => release(left, () => stopping)
      }))

      /**
       * Settles one payment: through the group commit when there is a batcher, else (or when its signature needs the
       * token's bytes overload) in a transaction of its own.
       */
      const send = (paymentId: string, p: VerifiedPayment): Effect.Effect<Sent> =>
        Option.match(settlesAsVrs(p.signature) ? commits : Option.none(), {
          onNone: () => sendOne(paymentId, p),
          onSome: (c) =>
            Effect.gen(function* () {
              const done = yield* Deferred.make<Sent>()
              yield* c.offer({ paymentId, payment: p, done })
              return yield* Deferred.await(done)
            })
        })

      /** Payments waiting for the next batch (behind the transaction in flight). */
      const waiting = Option.match(commits, { onNone: () => Effect.succeed(0), onSome: (c) => c.waiting })

      return { send, waiting, batching: Option.isSome(batcher) } as const
    })

    const settlers = new Map<string, Effect.Effect.Success<ReturnType<typeof settlerOn>>>()
    for (const w of writers.all) settlers.set(w.chain.network, yield* settlerOn(w))
    const primary = settlers.get(writers.chain.network)!
    /** The settler of the payment's network (a Map get: nothing more on the hot path). */
    const send = (paymentId: string, p: VerifiedPayment): Effect.Effect<Sent> => (settlers.get(p.network) ?? primary).send(paymentId, p)
    /** Payments waiting for the next batch, over every network. */
    const waiting = Effect.map(Effect.all([...settlers.values()].map((x) => x.waiting)), (ns) => ns.reduce((a, b) => a + b, 0))
    return { send, waiting, batching: primary.batching, maxBatch } as const
  }),
  dependencies: [TreasuryWriter.Default, PaymentsRepo.Default]
}) {}
