// Remainders back to payers on chain, BATCHED: each is an EIP-3009 transferWithAuthorization from the treasury to the
// payer, signed by the treasury key with the nonce fixed at the remainder's creation, and many go in one
// SettlementBatcher `settle(token, items)` transaction (one by one through the token without a batcher). A remainder is
// confirmed once, from the batcher's per-item event, the token's AuthorizationUsed and the Transfer to the payer;
// its ledger movement (remainders payable → treasury) is booked in the transaction that confirms it.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { getAddress, type Hex, type TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { transferWithAuthorizationTypes } from "../../layers/devnet/usdcAbi.js"
import { Networks } from "../../layers/Networks.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { newId } from "../../src/domain/Ids.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { authorizationsPaid, batchCalldata, batchGas, type ReceiptLog, singleCalldata } from "../payments/chainOutcome.js"
import { authorizationPayment } from "../treasury/chainReads.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { decodeRemainders, REMAINDERS_PAYABLE, type RemainderRow } from "./Repo.js"

/** The most remainders in one transaction (the batcher's gas per item bounds it like settlements). */
export const REMAINDER_BATCH_MAX = 100
const LEASE_MS = 60_000
const RETRY_MS = 5_000
/** An authorization is valid this long after it is signed (re-signed with the same nonce if sent again later). */
const VALID_FOR_SECONDS = 3_600n

/**
 * Which remainders a mined transaction paid (`authorizationsPaid`: from the treasury to each payer, its nonce, its
 * amount). The batcher's per-item report is required when the transaction went through the batcher (its `to`); one
 * sent straight to the token has none.
 */
export const paidBack = (
  chain: Pick<ChainShape, "usdc" | "treasury">,
  receipt: { readonly status: TransactionReceipt["status"]; readonly logs: ReadonlyArray<ReceiptLog>; readonly to: string | null },
  items: ReadonlyArray<Pick<RemainderRow, "toAddress" | "amount" | "authNonce">>
): ReadonlyArray<boolean> => {
  const viaBatcher = receipt.to !== null && receipt.to.toLowerCase() !== chain.usdc.address.toLowerCase() ? receipt.to : undefined
  return authorizationsPaid(chain.usdc.address, viaBatcher, receipt, items.map((r) => ({ from: chain.treasury, to: r.toAddress, nonce: r.authNonce, amount: r.amount })))
}

export class Remainders extends Effect.Service<Remainders>()("remainders/Remainders", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const networks = yield* Networks
    const writers = yield* TreasuryWriter
    const ledger = yield* Ledger
    const rows = (effect: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) => Effect.flatMap(effect, (r) => Effect.orDie(decodeRemainders(r)))

    /** The treasury's signed authorization paying `r` back (its stored nonce; valid from now for an hour). */
    const authorize = (chain: ChainShape, r: RemainderRow, nowSeconds: bigint) =>
      Effect.gen(function* () {
        const sign = Option.getOrUndefined(chain.signer)?.account.signTypedData
        if (sign === undefined) return yield* Effect.dieMessage("remainders need the treasury's local key")
        const validBefore = nowSeconds + VALID_FOR_SECONDS
        const nonce = r.authNonce as Hex
        const signature = yield* Effect.promise(() =>
          sign({
            domain: { name: chain.usdc.name, version: chain.usdc.version, chainId: chain.chainId, verifyingContract: chain.usdc.address },
            types: transferWithAuthorizationTypes,
            primaryType: "TransferWithAuthorization",
            message: { from: chain.treasury, to: getAddress(r.toAddress), value: r.amount, validAfter: 0n, validBefore, nonce }
          }))
        return {
          payer: chain.treasury,
          payTo: getAddress(r.toAddress),
          asset: chain.usdc.address,
          network: chain.network,
          amount: r.amount,
          nonce,
          validAfter: 0n,
          validBefore,
          signature,
          headerSha256: ""
        } satisfies VerifiedPayment
      })

    /** Books what a mined transaction paid back (once: only `submitted` rows of that transaction move) and frees the rest. */
    const record = (chain: ChainShape, txId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>, sent: ReadonlyArray<RemainderRow>) =>
      Effect.gen(function* () {
        const writer = writers.on(chain.network)
        const now = yield* Clock.currentTimeMillis
        const paid = outcome._tag === "Mined" ? paidBack(chain, outcome.receipt, sent) : sent.map(() => false)
        // An item that failed because its authorization was used before (a transaction we never recorded) is paid there.
        const elsewhere = yield* Effect.forEach(sent, (r, i) =>
          paid[i] === true ? Effect.succeed(Option.none()) : authorizationPayment(chain, chain.treasury, r.authNonce as Hex, r.toAddress, r.amount).pipe(
            Effect.map((found) => found.payment),
            Effect.orElseSucceed(() => Option.none())
          ))
        yield* sql.withTransaction(Effect.gen(function* () {
          yield* writer.recordIn(txId, outcome)
          for (const [i, r] of sent.entries()) {
            const where = paid[i] === true && outcome._tag === "Mined"
              ? Option.some({ txHash: outcome.receipt.transactionHash, block: outcome.receipt.blockNumber })
              : elsewhere[i] ?? Option.none()
            if (Option.isNone(where)) {
              yield* sql`UPDATE remainders SET status = 'pending', treasury_tx_id = NULL, last_error = 'not paid by its transaction; sent again',
                         next_attempt_at = ${new Date(now + RETRY_MS)} WHERE id = ${r.id} AND status = 'submitted' AND treasury_tx_id = ${txId}`
              continue
            }
            const confirmed = yield* sql`UPDATE remainders SET status = 'confirmed', tx_hash = ${where.value.txHash}, block_number = ${where.value.block.toString()},
                                           confirmed_at = now() WHERE id = ${r.id} AND status = 'submitted' AND treasury_tx_id = ${txId} RETURNING id`
            if (confirmed.length === 0) continue
            yield* ledger.transfer({
              kind: "remainder_sent",
              movements: [{ debit: REMAINDERS_PAYABLE, credit: networks.treasuryAccount(chain.network), amount: r.amount }],
              subjectId: r.executionId ?? r.id,
              chainBlock: where.value.block,
              txHash: where.value.txHash
            }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
          }
        }))
      })

    /** Remainders whose payment never arrived go nowhere: voided, their amount back to settlement receivable. */
    const voidUnpaid = sql.withTransaction(Effect.gen(function* () {
      const voided = yield* rows(sql`
        UPDATE remainders r SET status = 'void' FROM payments p
        WHERE r.payment_id = p.id AND p.status = 'failed' AND r.status = 'pending' RETURNING r.*`)
      for (const r of voided) {
        yield* ledger.transfer({
          kind: "remainder_void",
          movements: [{ debit: REMAINDERS_PAYABLE, credit: Accounts.settlementReceivable, amount: r.amount }],
          subjectId: r.executionId ?? r.id
        }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
      }
    }))

    /**
     * One pass on one network: up to REMAINDER_BATCH_MAX due remainders (their payment settled) in one transaction. A
     * remainder goes back on its payment's network; one without a payment (a credit withdrawal) on the primary.
     */
    const sendDueOn = (chain: ChainShape) => Effect.gen(function* () {
      const writer = writers.on(chain.network)
      if (!writer.enabled) return 0
      const now = yield* Clock.currentTimeMillis
      const onPrimary = chain.network === networks.primary.network
      const due = yield* rows(sql`
        UPDATE remainders SET next_attempt_at = ${new Date(now + LEASE_MS)}, attempts = attempts + 1
        WHERE id IN (SELECT r.id FROM remainders r LEFT JOIN payments p ON p.id = r.payment_id
                     WHERE r.status = 'pending' AND r.next_attempt_at <= ${new Date(now)}
                       AND (r.payment_id IS NULL OR p.status = 'settled')
                       AND (${onPrimary ? sql`p.network IS NULL OR p.network = '' OR ` : sql``}p.network = ${chain.network})
                     ORDER BY r.next_attempt_at LIMIT ${REMAINDER_BATCH_MAX} FOR UPDATE OF r SKIP LOCKED)
        RETURNING *`)
      if (due.length === 0) return 0
      const nowSeconds = BigInt(Math.floor(now / 1000))
      const items = yield* Effect.forEach(due, (r) => authorize(chain, r, nowSeconds))
      const batched = Option.isSome(chain.batcher) && due.length > 1
      const ids = due.map((r) => r.id)
      const tx = yield* writer.submit({
        purpose: "remainder_batch",
        subjectId: newId("rbatch"),
        to: batched ? Option.getOrThrow(chain.batcher) : chain.usdc.address,
        data: batched ? batchCalldata(chain.usdc.address, items) : singleCalldata(items[0]!),
        gas: batched ? batchGas(due.length) : 150_000n,
        logFields: { remainders: String(due.length) },
        linkStatement: (txId) => sql`UPDATE remainders SET status = 'submitted', treasury_tx_id = ${txId}, last_error = NULL WHERE id IN ${sql.in(ids)} AND status = 'pending'`
      })
      // One at a time without a batcher: the rest wait for the next pass.
      const sent = batched ? due : due.slice(0, 1)
      if (!batched && due.length > 1) yield* sql`UPDATE remainders SET status = 'pending', treasury_tx_id = NULL, next_attempt_at = now() WHERE id IN ${sql.in(ids.slice(1))}`
      const receipt = yield* writer.awaitReceipt(tx)
      if (Option.isSome(receipt)) yield* record(chain, tx.id, { _tag: "Mined", receipt: receipt.value }, sent.map((r) => ({ ...r, status: "submitted" as const })))
      return sent.length
    }).pipe(
      Effect.catchAll((error) => Effect.as(Effect.logWarning(`remainders pass on ${chain.network} failed; retried after the lease: ${error.message}`), 0))
    )

    /** One pass over every network (each its own batch transaction, from its own nonce). */
    const sendDue = Effect.gen(function* () {
      yield* voidUnpaid
      const sent = yield* Effect.forEach(networks.all, sendDueOn)
      return sent.reduce((a, b) => a + b, 0)
    }).pipe(
      Effect.catchAll((error) => Effect.as(Effect.logWarning(`remainders pass failed; retried after the lease: ${error.message}`), 0)),
      Effect.withSpan("Remainders.sendDue")
    )

    /** The treasury worker found a remainder batch's fate: record it for the remainders it carried. */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const outcome = yield* writers.on(tx.network).observe(tx)
        if (outcome._tag === "Pending") return
        const sent = yield* rows(sql`SELECT * FROM remainders WHERE treasury_tx_id = ${tx.id} AND status = 'submitted'`)
        yield* record(networks.of(tx.network), tx.id, outcome, sent)
      })

    return { sendDue, resolveTx } as const
  }),
  dependencies: [TreasuryWriter.Default, Ledger.Default]
}) {}
