// An upto payment's rows (purpose 'upto', migrations/0052): the reservation of the maximum (the payer's unsettled
// payments must leave the balance to cover it, as for `exact`), the charge once the call is over, and what the
// settlement needs of the signed authorization.
import type { SqlClient } from "@effect/sql"
import { historyStatement } from "../../machines/runner.js"
import { settlementMachine } from "../../machines/settlement.js"
import { startMachine } from "../../machines/step.js"
import { newPaymentId } from "../../src/domain/Ids.js"
import { PAYMENT_LEASE_MS } from "./Repo.js"

/** The most `valid_before` holds (a bigint column): a later deadline is kept whole in `upto_deadline`. */
const VALID_BEFORE_CAP = 1n << 62n

export interface UptoReservation {
  readonly payer: `0x${string}`
  readonly payTo: `0x${string}`
  readonly asset: `0x${string}`
  readonly network: string
  /** The call's maximum: what the payment holds (and the payer's spending limits count) until the call is over. */
  readonly maximum: bigint
  readonly permitted: bigint
  /** 32-byte hex (layers/x402/upto/payload.ts nonceKey): the (asset, payer, nonce) key refuses a second use. */
  readonly nonce: string
  readonly deadline: bigint
  readonly validAfter: bigint
  readonly signature: string
  readonly headerSha256: string
  readonly balance: bigint
}

/** The payment's row (its settlement machine started), inserted only if the payer's balance covers it beside its other unsettled payments. */
export const uptoPaymentStatements = (sql: SqlClient.SqlClient, r: UptoReservation, requestId: string, now: number) => {
  const id = newPaymentId()
  const start = startMachine(settlementMachine, {})
  const validBefore = r.deadline > VALID_BEFORE_CAP ? VALID_BEFORE_CAP : r.deadline
  const payer = r.payer.toLowerCase()
  return {
    id,
    statements: [
      sql`INSERT INTO payments (id, purpose, subject_id, payer, pay_to, asset, network, amount, nonce, valid_after, valid_before,
                                signature, header_sha256, status, machine_snapshot, next_attempt_at, upto_permitted, upto_deadline)
          SELECT ${id}, 'upto', ${requestId}, ${payer}, ${r.payTo.toLowerCase()}, ${r.asset.toLowerCase()}, ${r.network}, ${r.maximum.toString()}::bigint,
                 ${r.nonce}, ${r.validAfter.toString()}::bigint, ${validBefore.toString()}::bigint, ${r.signature.toLowerCase()}, ${r.headerSha256},
                 ${start.state}, ${JSON.stringify(start.persisted)}::jsonb, ${new Date(now + PAYMENT_LEASE_MS)}::timestamptz,
                 ${r.permitted.toString()}::numeric, ${r.deadline.toString()}::numeric
          WHERE payer_funds_cover(${payer}, ${r.network}, ${r.asset.toLowerCase()}, ${r.maximum.toString()}::bigint, ${r.balance.toString()}::numeric,
                                  ${Math.floor(now / 1000)}::bigint)`,
      historyStatement(sql, [{ machine: "settlement", actorId: id, event: { type: "RESERVED" }, from: null, to: start.state, at: now }])
    ]
  }
}

/** The call is over and used `charged` (≤ the maximum): what the settlement moves. */
export const chargeStatement = (sql: SqlClient.SqlClient, paymentId: string, charged: bigint) =>
  sql`UPDATE payments SET upto_charged = ${charged.toString()}::bigint WHERE id = ${paymentId} AND purpose = 'upto'`

/** What the settle call needs of an upto payment (uint256 values in decimal). */
export interface UptoSettleRow {
  readonly id: string
  readonly subjectId: string
  readonly payer: string
  readonly asset: string
  readonly network: string
  readonly amount: string
  readonly nonce: string
  readonly validAfter: string
  readonly signature: string
  readonly status: string
  readonly uptoCharged: string | null
  readonly uptoPermitted: string
  readonly uptoDeadline: string
  readonly treasuryTxId: string | null
}

export const uptoSettleRow = (sql: SqlClient.SqlClient, paymentId: string) =>
  sql<UptoSettleRow>`SELECT id, subject_id, payer, asset, network, amount::text, nonce, valid_after::text, signature, status,
                            upto_charged::text, upto_permitted::text, upto_deadline::text, treasury_tx_id
                     FROM payments WHERE id = ${paymentId} AND purpose = 'upto'`
