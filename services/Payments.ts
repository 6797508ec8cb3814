// Accepted payments: reservation (the once-only guard), settlement on chain, and the recovery worker that finishes what a crash interrupted.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import type { Hex } from "viem"
import type { PaymentRequirements } from "../src/domain/Errors.js"
import { newPaymentId, type PaymentId } from "../src/domain/Ids.js"
import {
  PaymentRejected,
  PaymentVerifier,
  type RejectionReason,
  SettlementError,
  type VerifiedPayment
} from "../layers/PaymentVerifier.js"
import { type SettlementEvent, settlementMachine } from "../machines/settlement.js"
import type { LedgerInvariantError } from "./Ledger.js"
import { batch } from "./Batch.js"
import { Machines, type PersistedSnapshot, startMachine, stepMachine, type Transition } from "./Machines.js"
import { isUniqueViolation } from "./SqlErrors.js"

export const PaymentPurpose = Schema.Literal("registration", "execution")
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
  machineSnapshot: Schema.NullOr(Schema.Unknown)
})
export type PaymentRow = typeof PaymentRow.Type

/** What a purpose (registration, execution) does when its payment settles or fails for good; runs inside that transaction. */
export interface PurposeHandlers {
  readonly onSettled: (payment: PaymentRow, txHash: string) => Effect.Effect<void, SqlError.SqlError | LedgerInvariantError>
  readonly onFailed: (payment: PaymentRow, reason: string) => Effect.Effect<void, SqlError.SqlError | LedgerInvariantError>
}

/** The outcome of trying to settle now. */
export type SettleOutcome =
  | { readonly _tag: "Settled"; readonly txHash: string }
  | { readonly _tag: "Failed"; readonly reason: RejectionReason | "rpc_error"; readonly message: string }
  | { readonly _tag: "Pending"; readonly message: string }

/** A request's settlement holds the payment this long before the recovery worker may take it over. */
const LEASE_SECONDS = 60

const toVerified = (row: PaymentRow): VerifiedPayment => ({
  payer: row.payer as `0x${string}`,
  payTo: row.payTo as `0x${string}`,
  asset: row.asset as `0x${string}`,
  network: row.network,
  amount: row.amount,
  nonce: row.nonce as Hex,
  validAfter: row.validAfter,
  validBefore: row.validBefore,
  signature: row.signature as Hex,
  headerSha256: row.headerSha256,
  payload: {
    x402Version: 1,
    scheme: "exact",
    network: row.network,
    payload: {
      signature: row.signature,
      authorization: {
        from: row.payer,
        to: row.payTo,
        value: row.amount.toString(),
        validAfter: row.validAfter.toString(),
        validBefore: row.validBefore.toString(),
        nonce: row.nonce
      }
    }
  }
})

const persistedOf = (row: PaymentRow): PersistedSnapshot =>
  row.machineSnapshot !== null && typeof row.machineSnapshot === "object" && "value" in row.machineSnapshot && "context" in row.machineSnapshot
    ? { value: String(row.machineSnapshot.value), context: row.machineSnapshot.context }
    : { value: row.status, context: { attempts: row.attempts, nextAttemptAt: null, txHash: row.txHash, reason: row.failureReason } }

export class Payments extends Effect.Service<Payments>()("Payments", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const verifier = yield* PaymentVerifier
    const machines = yield* Machines
    const handlers = new Map<PaymentPurpose, PurposeHandlers>()
    const decodeRow = Schema.decodeUnknown(PaymentRow)

    const registerPurpose = (purpose: PaymentPurpose, h: PurposeHandlers) => Effect.sync(() => void handlers.set(purpose, h))
    const handlerFor = (purpose: PaymentPurpose) =>
      Effect.fromNullable(handlers.get(purpose)).pipe(Effect.orDieWith(() => new Error(`no handler for payment purpose ${purpose}`)))

    /** The reservation's row and first transition, as statements for a caller that batches its writes. */
    const reserveStatements = (p: VerifiedPayment, purpose: PaymentPurpose, subjectId: string, now: number) => {
      const id = newPaymentId()
      const start = startMachine(settlementMachine, {})
      return {
        id,
        statements: [
          sql`INSERT INTO payments ${sql.insert({
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
            status: start.state,
            machineSnapshot: JSON.stringify(start.persisted),
            nextAttemptAt: new Date(now + LEASE_SECONDS * 1000)
          })}`
        ],
        transition: { machine: "settlement", actorId: id, event: { type: "RESERVED" }, from: null, to: start.state, at: now } satisfies Transition
      }
    }

    /** A unique key of payments was hit: this authorization (or this very header) was already used. */
    const alreadyUsed = (error: SqlError.SqlError): Effect.Effect<never, PaymentRejected | SqlError.SqlError> =>
      isUniqueViolation(error, "payments_authorization_key") || isUniqueViolation(error, "payments_header_key")
        ? Effect.fail(new PaymentRejected({ reason: "payment_already_used", message: "this payment authorization was already used" }))
        : Effect.fail(error)

    /**
     * Claims the authorization for this purpose. Must run inside the caller's transaction: the unique
     * (asset, payer, nonce) key makes a second use fail, even when two requests race.
     */
    const reserve = (p: VerifiedPayment, purpose: PaymentPurpose, subjectId: string) =>
      Effect.gen(function* () {
        const reservation = reserveStatements(p, purpose, subjectId, yield* Clock.currentTimeMillis)
        yield* batch(sql, [...reservation.statements, machines.recordStatement([reservation.transition])])
        return reservation.id as PaymentId
      }).pipe(Effect.catchTag("SqlError", alreadyUsed))

    /**
     * Applies an event to the payment's settlement machine inside the caller's transaction: the new snapshot, its history,
     * and the purpose's effects (onSettled / onFailed) commit together. Events the state does not accept are no-ops,
     * which makes completion and failure idempotent.
     */
    const applyIn = (id: string, event: SettlementEvent) =>
        Effect.gen(function* () {
          const rows = yield* sql`SELECT * FROM payments WHERE id = ${id} FOR UPDATE`
          if (rows[0] === undefined) return
          const row = yield* Effect.orDie(decodeRow(rows[0]))
          const step = stepMachine(settlementMachine, persistedOf(row), event)
          if (!step.changed) return
          const handler = yield* handlerFor(row.purpose)
          const updated = { ...row, status: step.state === "retrying" ? "retrying" as const : row.status }
          let nextAttemptAt: number | null = null
          for (const action of step.actions) {
            if (action.type === "onSettled" && event.type === "SETTLED") yield* handler.onSettled({ ...updated, txHash: event.txHash }, event.txHash)
            if (action.type === "onFailed" && event.type === "FAILED_FINAL") yield* handler.onFailed(updated, event.reason)
            if (action.type === "scheduleRetry" && event.type === "FAILED_TRANSIENT") nextAttemptAt = step.snapshot.context.nextAttemptAt
          }
          yield* sql`UPDATE payments SET ${sql.update({
            status: step.state,
            machineSnapshot: JSON.stringify(step.persisted),
            updatedAt: new Date(event.at),
            ...(event.type === "SETTLED" ? { txHash: event.txHash, settledAt: new Date(event.at) } : {}),
            ...(event.type === "FAILED_FINAL" ? { failureReason: event.reason } : {}),
            ...(event.type === "FAILED_TRANSIENT" ? { failureReason: event.error.slice(0, 500) } : {}),
            ...(nextAttemptAt === null ? {} : { nextAttemptAt: new Date(nextAttemptAt) })
          })} WHERE id = ${id}`
          yield* machines.record("settlement", id, [{ event, from: step.from, to: step.state, at: event.at }])
        })

    const apply = (id: string, event: SettlementEvent) => sql.withTransaction(applyIn(id, event))

    const complete = (id: string, txHash: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => apply(id, { type: "SETTLED", at, txHash })).pipe(Effect.withSpan("Payments.complete"))

    const fail = (id: string, reason: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => apply(id, { type: "FAILED_FINAL", at, reason })).pipe(Effect.withSpan("Payments.fail"))

    /** Moves the money on chain, retrying transient RPC faults a few times; records nothing. */
    const submit = (p: VerifiedPayment, requirements: PaymentRequirements): Effect.Effect<SettleOutcome> =>
      verifier.settle(p, requirements).pipe(
        Effect.retry({
          while: (e: SettlementError) => !e.final,
          schedule: Schedule.exponential(Duration.millis(200)).pipe(Schedule.intersect(Schedule.recurs(2)))
        }),
        Effect.match({
          onSuccess: (txHash): SettleOutcome => ({ _tag: "Settled", txHash }),
          onFailure: (error): SettleOutcome =>
            error.final ? { _tag: "Failed", reason: error.reason, message: error.message } : { _tag: "Pending", message: error.message }
        })
      )

    /** Records a settlement outcome in the payment's machine, inside the caller's transaction. */
    const recordIn = (id: string, outcome: SettleOutcome) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        applyIn(
          id,
          outcome._tag === "Settled"
            ? { type: "SETTLED", at, txHash: outcome.txHash }
            : outcome._tag === "Failed"
            ? { type: "FAILED_FINAL", at, reason: outcome.reason }
            : { type: "FAILED_TRANSIENT", at, error: outcome.message }
        ))

    /** Settles on chain, then records the outcome in its own transaction. */
    const settle = (id: string, p: VerifiedPayment, requirements: PaymentRequirements): Effect.Effect<SettleOutcome, SqlError.SqlError | LedgerInvariantError> =>
      Effect.tap(submit(p, requirements), (outcome) => sql.withTransaction(recordIn(id, outcome))).pipe(Effect.withSpan("Payments.settle"))

    /**
     * One pass of the recovery worker: payments whose lease ran out (the process that took them crashed) or whose
     * retry is due are looked up on chain and then completed, re-submitted or failed.
     */
    const recoverDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql.withTransaction(
        sql`
          UPDATE payments SET next_attempt_at = ${new Date(now + LEASE_SECONDS * 1000)}, attempts = attempts + 1
          WHERE id IN (
            SELECT id FROM payments
            WHERE status IN ('reserved', 'retrying') AND next_attempt_at <= ${new Date(now)}
            ORDER BY next_attempt_at
            LIMIT 20
            FOR UPDATE SKIP LOCKED)
          RETURNING *`.pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(PaymentRow))), Effect.orDie)
      )
      yield* Effect.forEach(
        due,
        (row) =>
          Effect.gen(function* () {
            if (row.status === "retrying") yield* apply(row.id, { type: "RETRY_DUE", at: now })
            const existing = yield* verifier.findSettlement(row.payer as `0x${string}`, row.nonce as Hex)
            if (Option.isSome(existing)) return yield* complete(row.id, existing.value)
            if (row.validBefore <= BigInt(Math.floor(now / 1000))) {
              return yield* fail(row.id, "invalid_exact_evm_payload_authorization_valid_before")
            }
            yield* settle(row.id, toVerified(row), verifier.requirements({ amount: row.amount, resource: "recovery", description: row.purpose }))
          }).pipe(
            Effect.catchTag("SettlementError", (e) => Effect.logWarning(`payment ${row.id}: chain lookup failed, will retry: ${e.message}`)),
            Effect.catchAllCause((cause) => Effect.logError(`payment ${row.id}: recovery failed; it stays held for the next pass`, cause))
          ),
        { concurrency: 4, discard: true }
      )
      return due.length
    }).pipe(Effect.withSpan("Payments.recoverDue"))

    return { registerPurpose, reserve, reserveStatements, alreadyUsed, submit, recordIn, settle, recoverDue } as const
  })
}) {}

/** Runs the recovery worker every few seconds for the life of the service. */
export const PaymentsRecoveryLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const payments = yield* Payments
    yield* payments.recoverDue.pipe(
      Effect.catchAllCause((cause) => Effect.logError("payment recovery pass failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.seconds(5))),
      Effect.forkScoped
    )
  })
)
