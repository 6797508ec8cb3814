// The remainders table (what metered calls did not use, and payers' credit withdrawals, owed back on chain) and the
// payers' credit accounts. Only services/remainders and the statements below write them.
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { newId } from "../../src/domain/Ids.js"

/** Remainders owed back to payers on chain, not yet paid. */
export const REMAINDERS_PAYABLE = "remainders_payable"
/** A payer's credit: remainders it chose to keep at the marketplace (liability), per wallet, lower-case. */
export const creditAccount = (wallet: string) => `credit:${wallet.toLowerCase()}`

export const RemainderRow = Schema.Struct({
  id: Schema.String,
  executionId: Schema.NullOr(Schema.String),
  paymentId: Schema.NullOr(Schema.String),
  toAddress: Schema.String,
  amount: Schema.BigInt,
  source: Schema.Literal("metered", "credit_withdrawal"),
  status: Schema.Literal("pending", "submitted", "confirmed", "void"),
  authNonce: Schema.String,
  treasuryTxId: Schema.NullOr(Schema.String),
  txHash: Schema.NullOr(Schema.String),
  attempts: Schema.Number
})
export type RemainderRow = typeof RemainderRow.Type
export const decodeRemainders = Schema.decodeUnknown(Schema.Array(RemainderRow))

export class RemaindersRepo extends Effect.Service<RemaindersRepo>()("remainders/RemaindersRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /**
     * A remainder owed on chain, created in the transaction that moved its amount to remainders payable. Its EIP-3009
     * nonce is fixed here: however often it is sent, the token pays it at most once.
     */
    const create = (r: { readonly executionId: string | null; readonly paymentId: string | null; readonly to: string; readonly amount: bigint; readonly source: "metered" | "credit_withdrawal" }) =>
      sql`INSERT INTO remainders ${sql.insert({
        id: newId("rem"),
        executionId: r.executionId,
        paymentId: r.paymentId,
        toAddress: r.to.toLowerCase(),
        amount: r.amount.toString(),
        source: r.source,
        status: "pending",
        authNonce: `0x${randomBytes(32).toString("hex")}`
      })}`.pipe(Effect.asVoid)

    /** The payer's credit balance (micro-USDC, positive), locked when `lock` (a withdrawal spends it). */
    const creditOf = (wallet: string, lock: boolean) =>
      Effect.gen(function* () {
        if (lock) yield* sql`SELECT id FROM ledger_accounts WHERE id = ${creditAccount(wallet)} FOR NO KEY UPDATE`
        const rows = yield* sql<{ balance: string }>`SELECT (-COALESCE(SUM(amount), 0))::text AS balance FROM ledger_entries WHERE account_id = ${creditAccount(wallet)}`
        return BigInt(rows[0]?.balance ?? "0")
      })

    return { create, creditOf } as const
  })
}) {}
