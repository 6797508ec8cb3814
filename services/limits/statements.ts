// The statements other features run for spending limits: the count (or refusal) inside a paid call's reservation
// statement, and the give-back inside a refund's transaction. The SQL function behind them: migrations/0029.
import type { SqlClient } from "@effect/sql"
import { PaymentRejected } from "../../layers/x402/payment.js"
import { formatUsdc } from "../../src/domain/Money.js"

/** The SQLSTATE `spend_within_limits` raises when a payment would break a limit. */
const LIMIT_REFUSED = "SL402"

/** A timestamp's UTC day, the unit of the daily limits (docs/clients.md). */
export const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10)

export interface Spend {
  readonly paymentId: string
  readonly payer: string
  readonly agentId: string
  readonly amount: bigint
  readonly now: number
}

/**
 * Counts a payment against its payer's limits, as one data-modifying statement for the reservation's batch: it records
 * the count (payers with limits only) or aborts the whole reservation with SL402, so nothing is reserved or settled.
 */
export const spendStatement = (sql: SqlClient.SqlClient, s: Spend) => {
  const payer = s.payer.toLowerCase()
  const agent = s.agentId.toLowerCase()
  const day = utcDay(s.now)
  const amount = s.amount.toString()
  return sql`INSERT INTO limit_spends (payment_id, payer, agent_id, day, amount)
    SELECT ${s.paymentId}, ${payer}, ${agent}, ${day}::date, ${amount}::bigint
    WHERE spend_within_limits(${payer}, ${agent}, ${amount}::bigint, ${day}::date)`
}

/**
 * Gives a refunded amount back to the day (and agent) its payment was counted in, once per `source` (the refund's
 * execution or chain), never more than was counted and never below zero; a no-op for payers without limits. A SELECT:
 * put it LAST in a batch (a CTE that only reads is not run).
 */
export const restoreStatement = (sql: SqlClient.SqlClient, r: { readonly paymentId: string; readonly source: string; readonly amount: bigint }) =>
  sql`SELECT restore_spending(${r.paymentId}, ${r.source}, ${r.amount.toString()}::bigint)`

const parseDetail = (detail: string): Record<string, unknown> => {
  try {
    const value: unknown = JSON.parse(detail)
    return typeof value === "object" && value !== null ? Object.fromEntries(Object.entries(value)) : {}
  } catch {
    return {}
  }
}

const micros = (value: unknown) => (typeof value === "string" && /^\d+$/.test(value) ? formatUsdc(BigInt(value)) : value)

/** The refusal an SL402 carries, as the payment rejection the 402 answers with (details name the limit); else undefined. */
export const limitRefusal = (error: unknown): PaymentRejected | undefined => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
  if (typeof cause !== "object" || cause === null || !("code" in cause) || cause.code !== LIMIT_REFUSED) return undefined
  const detail = "detail" in cause && typeof cause.detail === "string" ? cause.detail : "{}"
  const parsed = parseDetail(detail)
  const details = Object.fromEntries(
    Object.entries(parsed).filter(([, v]) => v !== null).map(([k, v]) => [k, k === "max" || k === "spent" || k === "amount" ? micros(v) : v])
  )
  const message = "message" in cause && typeof cause.message === "string" ? cause.message : "the payment would break the payer's spending limits"
  return new PaymentRejected({
    reason: "spending_limit_exceeded",
    message: `${message}; nothing was reserved or charged (GET /api/v1/payers/{wallet}/limits)`,
    details
  })
}
