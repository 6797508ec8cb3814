// Accepted payments in PostgreSQL: the reservation (the once-only guard), the settlement machine's row and its lease.
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { Hex } from "viem"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { historyStatement } from "../../machines/runner.js"
import { settlementMachine } from "../../machines/settlement.js"
import { isPersistedSnapshot, type PersistedSnapshot, startMachine } from "../../machines/step.js"
import { newPaymentId } from "../../src/domain/Ids.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"

// 'upto': a metered call's Permit2 maximum (services/payments/UptoSettlements.ts settles what it used, never the exact path).
export const PaymentPurpose = Schema.Literal("registration", "execution", "upto")
export type PaymentPurpose = typeof PaymentPurpose.Type

export const PaymentRow = Schema.Struct({
  id: Schema.String,
  purpose: PaymentPurpose,
  subjectId: Schema.String,
  payer: Schema.String,
  payTo: Schema.String,
  asset: Schema.String,
  network: Schema.String,
  amount: Schema.BigInt,
  nonce: Schema.String,
  validAfter: Schema.BigInt,
  validBefore: Schema.BigInt,
  signature: Schema.String,
  headerSha256: Schema.String,
  status: Schema.Literal("reserved", "retrying", "settled", "failed"),
  txHash: Schema.NullOr(Schema.String),
  failureReason: Schema.NullOr(Schema.String),
  attempts: Schema.Number,
  machineSnapshot: Schema.NullOr(Schema.Unknown),
  treasuryTxId: Schema.NullOr(Schema.String),
  /** An upto payment's charge once its call is over (what settles); null before, and for every other purpose. */
  uptoCharged: Schema.optional(Schema.NullOr(Schema.BigInt))
})
export type PaymentRow = typeof PaymentRow.Type
const decodeRows = Schema.decodeUnknown(Schema.Array(PaymentRow))

/** A request's settlement holds the payment this long before the recovery worker may take it over. */
export const PAYMENT_LEASE_MS = 60_000

/** The stored snapshot, or one derived from the status columns (rows written before machines were persisted). */
export const paymentSnapshot = (row: PaymentRow): PersistedSnapshot =>
  isPersistedSnapshot(row.machineSnapshot)
    ? row.machineSnapshot
    : { value: row.status, context: { attempts: row.attempts, nextAttemptAt: null, txHash: row.txHash, reason: row.failureReason } }

/** The verified payment a stored row came from (for settling it again after a crash). */
export const verifiedOf = (row: PaymentRow): VerifiedPayment => ({
  payer: row.payer as `0x${string}`,
  payTo: row.payTo as `0x${string}`,
  asset: row.asset as `0x${string}`,
  network: row.network,
  amount: row.amount,
  nonce: row.nonce as Hex,
  validAfter: row.validAfter,
  validBefore: row.validBefore,
  signature: row.signature as Hex,
  headerSha256: row.headerSha256
})

/** A new payment's row (reserved, its settlement machine started). */
const paymentRow = (id: string, p: VerifiedPayment, purpose: PaymentPurpose, subjectId: string, status: string, machineSnapshot: string, now: number) => ({
  id,
  purpose,
  subjectId,
  payer: p.payer,
  payTo: p.payTo,
  asset: p.asset,
  network: p.network,
  amount: p.amount.toString(),
  nonce: p.nonce,
  validAfter: p.validAfter.toString(),
  validBefore: p.validBefore.toString(),
  signature: p.signature,
  headerSha256: p.headerSha256,
  status,
  machineSnapshot,
  nextAttemptAt: new Date(now + PAYMENT_LEASE_MS)
})
type PaymentInsert = ReturnType<typeof paymentRow>

export class PaymentsRepo extends Effect.Service<PaymentsRepo>()("payments/PaymentsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = (effect: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) => Effect.flatMap(effect, (r) => Effect.orDie(decodeRows(r)))

    /**
     * The reservation's row and first transition, as statements for a caller that batches its writes. A payment that
     * carries the balance it was verified against is inserted only if that balance covers it and the payer's other
     * unsettled payments (`payer_funds_cover`, migrations/0038: SQLSTATE PF402 otherwise, nothing reserved).
     */
    const reserveStatements = (p: VerifiedPayment, purpose: PaymentPurpose, subjectId: string, now: number) => {
      const id = newPaymentId()
      const start = startMachine(settlementMachine, {})
      const row = paymentRow(id, p, purpose, subjectId, start.state, JSON.stringify(start.persisted), now)
      return {
        id,
        statements: [
          p.balance === undefined ? sql`INSERT INTO payments ${sql.insert(row)}` : coveredInsert(row, p.balance, now),
          historyStatement(sql, [{ machine: "settlement", actorId: id, event: { type: "RESERVED" }, from: null, to: start.state, at: now }])
        ]
      }
    }

    /** The payment's row, inserted only through the guard (it runs before the row exists: its own amount counts once). */
    const coveredInsert = (r: PaymentInsert, balance: bigint, now: number) =>
      sql`INSERT INTO payments (id, purpose, subject_id, payer, pay_to, asset, network, amount, nonce, valid_after, valid_before,
                                signature, header_sha256, status, machine_snapshot, next_attempt_at)
          SELECT ${r.id}, ${r.purpose}, ${r.subjectId}, ${r.payer}, ${r.payTo}, ${r.asset}, ${r.network}, ${r.amount}::bigint, ${r.nonce},
                 ${r.validAfter}::bigint, ${r.validBefore}::bigint, ${r.signature}, ${r.headerSha256}, ${r.status},
                 ${r.machineSnapshot}::jsonb, ${r.nextAttemptAt}::timestamptz
          WHERE payer_funds_cover(${r.payer}, ${r.network}, ${r.asset}, ${r.amount}::bigint, ${balance.toString()}::numeric,
                                  ${Math.floor(now / 1000)}::bigint)`

    const lock = (id: string) => rows(sql`SELECT * FROM payments WHERE id = ${id} FOR UPDATE`).pipe(Effect.map((r) => Option.fromNullable(r[0])))
    /** The machine's row for an optimistic unit of work (services/sql/UnitOfWork.ts `guardedRead`). */
    const guarded = {
      select: (id: string, lock: boolean) => sql`SELECT * FROM payments WHERE id = ${id} ${lock ? sql`FOR UPDATE` : sql``}`,
      decode: (r: ReadonlyArray<unknown>) => Effect.map(Effect.orDie(decodeRows(r)), (decoded) => Option.fromNullable(decoded[0]))
    }
    const find = (id: string) => rows(sql`SELECT * FROM payments WHERE id = ${id}`).pipe(Effect.map((r) => Option.fromNullable(r[0])))
    /** The payment made with the credential whose text hashes to `headerSha256` (unique: a credential pays once). */
    const findByHeader = (headerSha256: string) =>
      rows(sql`SELECT * FROM payments WHERE header_sha256 = ${headerSha256}`).pipe(Effect.map((r) => Option.fromNullable(r[0])))

    const linkTreasuryTx = (paymentId: string, txId: string) =>
      sql`UPDATE payments SET treasury_tx_id = ${txId} WHERE id = ${paymentId}`

    /** Every payment of a batch points at its transaction (in the database transaction that stores it). */
    const linkTreasuryTxMany = (paymentIds: ReadonlyArray<string>, txId: string) =>
      sql`UPDATE payments SET treasury_tx_id = ${txId} WHERE id IN ${sql.in(paymentIds)}`

    /** The payments a treasury transaction settles (a batch's, or a single one's). */
    const byTreasuryTx = (txId: string) => rows(sql`SELECT * FROM payments WHERE treasury_tx_id = ${txId} ORDER BY id`)

    /** Unfinished payments whose lease ran out (the process that took them died) or whose retry is due; leased to the caller. */
    const claimDue = (now: number, limit: number) =>
      rows(sql`
        UPDATE payments SET next_attempt_at = ${new Date(now + PAYMENT_LEASE_MS)}, attempts = attempts + 1
        WHERE id IN (
          SELECT id FROM payments
          WHERE status IN ('reserved', 'retrying') AND purpose <> 'upto' AND next_attempt_at <= ${new Date(now)}
          ORDER BY next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING *`)

    /** Keeps a payment leased while its settlement is in flight. */
    const renewLease = (id: string, until: Date) =>
      sql`UPDATE payments SET next_attempt_at = GREATEST(next_attempt_at, ${until}) WHERE id = ${id} AND status IN ('reserved', 'retrying')`.pipe(Effect.asVoid)

    return { reserveStatements, lock, guarded, find, findByHeader, linkTreasuryTx, linkTreasuryTxMany, byTreasuryTx, claimDue, renewLease } as const
  })
}) {}

/**
 * A call inside a chain is paid from its chain's budget: a payment row settled from the start (the budget is treasury
 * money since the root's payment settled), copied from the root's payment, with its read-back handle's hash.
 */
export const budgetPaymentStatement = (sql: SqlClient.SqlClient, p: {
  readonly paymentId: string
  readonly requestId: string
  readonly chainId: string
  readonly amount: bigint
  readonly nonce: string
  readonly handleSha256: string
  readonly now: number
}) =>
  sql`INSERT INTO payments (id, purpose, subject_id, payer, pay_to, asset, network, amount, nonce, valid_after, valid_before,
                            signature, header_sha256, status, tx_hash, settled_at)
      SELECT ${p.paymentId}, 'chain', ${p.requestId}, payer, pay_to, asset, network, ${p.amount.toString()}, ${p.nonce},
             0, 0, 'chain-budget', ${p.handleSha256}, 'settled', tx_hash, ${new Date(p.now)}
      FROM payments WHERE id = (SELECT payment_id FROM chains WHERE id = ${p.chainId})`

/**
 * A call paid from the payer's credit (services/remainders/CreditSpends.ts): a payment row settled from the start (the
 * credit is treasury money), no transaction. Its nonce is derived from the signed spend's: the (asset, payer, nonce)
 * index refuses a replayed spend, and the header's hash is the call's read-back proof.
 */
/**
 * The payment row of a call paid from money already held for the payer: its credit at the marketplace (purpose
 * 'credit'), or its batch-settlement channel (purpose 'channel', with the channel: the charge is the channel's
 * receivable until a claim and a settle collect it). Settled from the start: nothing for the settler to send.
 */
export const prepaidPaymentStatement = (sql: SqlClient.SqlClient, p: {
  readonly purpose: "credit" | "channel"
  readonly paymentId: string
  readonly requestId: string
  readonly payer: string
  readonly payTo: string
  readonly asset: string
  readonly network: string
  readonly amount: bigint
  readonly nonce: string
  readonly validBefore: number
  readonly headerSha256: string
  readonly now: number
  /** The voucher's signature (a credit spend's row says 'credit'). */
  readonly signature?: string
  readonly channelId?: string
}) =>
  sql`INSERT INTO payments ${sql.insert({
    id: p.paymentId,
    purpose: p.purpose,
    subjectId: p.requestId,
    payer: p.payer.toLowerCase(),
    payTo: p.payTo,
    asset: p.asset,
    network: p.network,
    amount: p.amount.toString(),
    nonce: p.nonce,
    validAfter: "0",
    validBefore: p.validBefore.toString(),
    signature: p.signature ?? p.purpose,
    headerSha256: p.headerSha256,
    status: "settled",
    settledAt: new Date(p.now),
    ...(p.channelId === undefined ? {} : { channelId: p.channelId })
  })}`

/** Whether `error` is the unique violation of a payment row already made with this nonce or header (a replay). */
export const isPaymentReplay = (error: unknown) =>
  isUniqueViolation(error, "payments_authorization_key") || isUniqueViolation(error, "payments_header_key")
