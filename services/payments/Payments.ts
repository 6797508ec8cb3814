// Accepted payments: the reservation (once-only), settlement on chain through the settler (group-committed treasury
// transactions) or a facilitator, front-run detection from the chain's own record, and recovery of what a crash or an
// RPC fault interrupted.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Option, Schedule } from "effect"
import { getAddress } from "viem"
import { Chain } from "../../layers/Chain.js"
import { Networks } from "../../layers/Networks.js"
import { recordSettlement } from "../../layers/observability/Metrics.js"
import { PaymentVerifier } from "../../layers/PaymentVerifier.js"
import type { PaymentCredential } from "../../layers/x402/credential.js"
import { PaymentRejected, sha256, type VerifiedPayment } from "../../layers/x402/payment.js"
import { MachineHost } from "../../machines/Host.js"
import type { PaymentRequirements } from "../../layers/x402/requirements.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import type { ChainReadError } from "../treasury/chainReads.js"
import { MoneyFaults } from "../treasury/Faults.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { batch } from "../sql/Batch.js"
import { lookUp, paidInBatch, pending, resolveInBatch, resolveSingle, type Settlement } from "./chainOutcome.js"
import { PAYMENT_LEASE_MS, type PaymentPurpose, type PaymentRow, PaymentsRepo, verifiedOf } from "./Repo.js"
import { Settler } from "./Settler.js"
import { AccountDeployer } from "./AccountDeployer.js"
import { unsettledRefusal } from "./unsettled.js"
import { withSpan } from "../../layers/observability/span.js"

export type { Settlement, SettleOutcome } from "./chainOutcome.js"

export class Payments extends Effect.Service<Payments>()("payments/Payments", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const networks = yield* Networks
    /** The network a payment (or its row) is on; lookups and receipts of its settlement go to that chain. */
    const on = (p: { readonly network: string }) => networks.of(p.network)
    const verifier = yield* PaymentVerifier
    const repo = yield* PaymentsRepo
    const writer = yield* TreasuryWriter
    const host = yield* MachineHost
    const faults = yield* MoneyFaults
    const settler = yield* Settler
    const deployer = yield* AccountDeployer

    /**
     * Why the database refused a reservation: a unique key of payments was hit (this authorization, or this very
     * header, was already used), or the payer's balance does not cover it beside its unsettled payments. Else the error.
     */
    const refused = (error: SqlError.SqlError): Effect.Effect<never, PaymentRejected | SqlError.SqlError> => {
      if (isUniqueViolation(error, "payments_authorization_key") || isUniqueViolation(error, "payments_header_key")) {
        return Effect.fail(new PaymentRejected({ reason: "payment_already_used", message: "this payment authorization was already used" }))
      }
      return Effect.fail(unsettledRefusal(error) ?? error)
    }

    /** Claims the authorization for a purpose inside the caller's transaction (the unique (asset, payer, nonce) key). */
    const reserve = (p: VerifiedPayment, purpose: PaymentPurpose, subjectId: string) =>
      Effect.gen(function* () {
        const reservation = repo.reserveStatements(p, purpose, subjectId, yield* Clock.currentTimeMillis)
        yield* batch(sql, reservation.statements)
        return reservation.id
      }).pipe(Effect.catchTag("SqlError", refused))

    /**
     * The facilitator's answer is not the record: the chain is. A success is confirmed by the authorization having paid
     * the treasury exactly (a facilitator that answers success for a payment that is not on chain gets no call through),
     * and any failure is looked up too, since someone else may have submitted the authorization (a front-runner, or the
     * facilitator itself before its answer was lost): no execution completes without money, no money stays without an
     * outcome. While the chain shows the authorization unused, still valid and covered, even a refusal is not final: a
     * facilitator also refuses for its own faults (its signer's nonces, its RPC), so the payment is held and tried again
     * until it settles or the chain says it never can (used elsewhere, expired, funds gone: `lookUp` fails it then).
     */
    const settleThroughFacilitator = (p: VerifiedPayment, requirements: PaymentRequirements): Effect.Effect<Settlement, ChainReadError> =>
      Effect.gen(function* () {
        const answer = yield* Effect.either(verifier.settle(p, requirements))
        const found = yield* lookUp(on(p), p, Option.none())
        if (found.outcome._tag !== "Pending") return found
        return pending(answer._tag === "Right" ? `the facilitator reported ${answer.right}, which the chain does not show yet` : answer.left.message)
      })

    /** Moves the money on chain and says what happened; records nothing but the treasury transaction itself. */
    const settleOnChain = (paymentId: string, p: VerifiedPayment, requirements: PaymentRequirements): Effect.Effect<Settlement> =>
      Effect.gen(function* () {
        yield* faults.beforeSettle(p)
        if (chain.settlement === "facilitator" && p.network === chain.network) return yield* settleThroughFacilitator(p, requirements)
        // A counterfactual (ERC-6492) payer's account is deployed first; until it is, the settlement waits (or fails).
        const notYet = yield* deployer.ensureDeployed(paymentId, p)
        if (Option.isSome(notYet)) return notYet.value
        const sent = yield* settler.send(paymentId, p)
        switch (sent._tag) {
          case "Single":
            return yield* resolveSingle(on(p), p, sent.txId, sent.outcome)
          case "Batch":
            return yield* resolveInBatch(on(p), p, sent.outcome, sent.paid)
          case "NotSent":
            return pending(sent.message)
        }
      }).pipe(
        Effect.catchTag("ChainReadError", (e) => Effect.succeed(pending(e.message))),
        recordSettlement,
        withSpan("Payments.settleOnChain")
      )

    /** Records a settlement in the payment's machine (and its treasury transaction's), inside the caller's transaction. */
    const recordIn = (paymentId: string, settlement: Settlement) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        if (Option.isSome(settlement.tx)) yield* writer.on(settlement.tx.value.network).recordIn(settlement.tx.value.id, settlement.tx.value.outcome)
        const o = settlement.outcome
        yield* host.deliver(
          "settlement",
          paymentId,
          o._tag === "Settled"
            ? { type: "SETTLED", at, txHash: o.txHash, block: o.block === null ? null : o.block.toString() }
            : o._tag === "Failed"
            ? { type: "FAILED_FINAL", at, reason: o.reason }
            : { type: "FAILED_TRANSIENT", at, error: o.message }
        )
      })

    /** Settles on chain, then records the outcome in its own transaction. */
    const settle = (paymentId: string, p: VerifiedPayment, requirements: PaymentRequirements) =>
      Effect.tap(settleOnChain(paymentId, p, requirements), (s) => sql.withTransaction(recordIn(paymentId, s))).pipe(
        Effect.map((s) => s.outcome),
        withSpan("Payments.settle")
      )

    /** The treasury worker found our settlement transaction's fate (after a crash or a slow chain): record it. */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const payment = yield* repo.find(tx.subjectId)
        const txWriter = writer.on(tx.network)
        const outcome = yield* txWriter.observe(tx)
        if (outcome._tag === "Pending") return
        if (Option.isNone(payment) || payment.value.status === "settled" || payment.value.status === "failed") {
          return yield* sql.withTransaction(txWriter.recordIn(tx.id, outcome))
        }
        const settlement = yield* resolveSingle(txWriter.chain, verifiedOf(payment.value), tx.id, outcome)
        // A dropped or reverted transaction whose authorization is still good is left to the recovery pass to resend.
        yield* sql.withTransaction(
          settlement.outcome._tag === "Pending" ? txWriter.recordIn(tx.id, outcome) : recordIn(payment.value.id, settlement)
        )
      })

    /**
     * The treasury worker found a batch's fate (after a crash, a slow chain or a failed booking): each of its payments
     * still open is settled by the batch's receipt or looked up per authorization, in a transaction of its own; then the
     * batch transaction is recorded. A payment whose authorization is still good is left to the recovery pass to resend.
     */
    const resolveBatchTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const txWriter = writer.on(tx.network)
        const chain = txWriter.chain
        const outcome = yield* txWriter.observe(tx)
        if (outcome._tag === "Pending") return
        const open = (yield* repo.byTreasuryTx(tx.id)).filter((row) => row.status === "reserved" || row.status === "retrying")
        const payments = open.map(verifiedOf)
        const paid = outcome._tag === "Mined" ? paidInBatch(chain, getAddress(tx.toAddress), outcome.receipt, payments) : []
        yield* Effect.forEach(open, (row, i) =>
          Effect.gen(function* () {
            const settlement = yield* resolveInBatch(chain, verifiedOf(row), outcome, paid[i] === true)
            if (settlement.outcome._tag !== "Pending") yield* sql.withTransaction(recordIn(row.id, settlement))
          }), { concurrency: 4, discard: true })
        yield* sql.withTransaction(txWriter.recordIn(tx.id, outcome))
      }).pipe(withSpan("Payments.resolveBatchTx"))

    const requirementsFor = (row: PaymentRow) => verifier.requirements({ amount: row.amount, resource: "recovery", description: row.purpose })

    /** One payment the recovery pass holds: finish it from what the chain says, or settle it (again). */
    const recoverOne = (row: PaymentRow, now: number) =>
      Effect.gen(function* () {
        if (row.status === "retrying") yield* host.deliverNow("settlement", row.id, { type: "RETRY_DUE", at: now })
        if (row.treasuryTxId !== null) {
          const tx = yield* writer.find(row.treasuryTxId)
          // A live transaction is the treasury worker's to follow: never sign a second one beside it.
          if (Option.isSome(tx) && (tx.value.state === "signed" || tx.value.state === "broadcast")) {
            return yield* repo.renewLease(row.id, new Date(now + PAYMENT_LEASE_MS))
          }
        }
        const p = verifiedOf(row)
        const found = yield* lookUp(on(p), p, Option.none())
        // Settled or failed for good; or the payer is short of the amount: a transaction now could not pay, so the
        // payment waits for its next try (or its expiry) without one.
        if (found.outcome._tag !== "Pending" || found.outcome.unfunded === true) return yield* sql.withTransaction(recordIn(row.id, found))
        yield* settle(row.id, p, requirementsFor(row))
      }).pipe(
        Effect.catchTag("ChainReadError", (e) => Effect.logWarning(`payment ${row.id}: chain lookup failed, will retry: ${e.message}`)),
        Effect.catchAllCause((cause) => Effect.logError(`payment ${row.id}: recovery failed; it stays held for the next pass`, cause))
      )

    /** One pass of the recovery worker over payments whose lease ran out or whose retry is due. */
    const recoverDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql.withTransaction(repo.claimDue(now, 20)).pipe(Effect.orDie)
      yield* Effect.forEach(due, (row) => recoverOne(row, now), { concurrency: 4, discard: true })
      return due.length
    }).pipe(withSpan("Payments.recoverDue"))

    /** The group commit's state: whether it batches, its batch size, and how many payments wait behind the transaction in flight. */
    const settlementQueue = { batching: settler.batching, maxBatch: settler.maxBatch, waiting: settler.waiting } as const

    /**
     * The payment a credential already made, if any: a request presenting the very same header text is a re-send of
     * the purchase it paid for (holding the header is the proof; it is never verified or reserved again).
     */
    const madeWith = (credential: PaymentCredential) => repo.findByHeader(sha256(credential.raw.trim())).pipe(Effect.orDie)

    return { reserve, madeWith, reserveStatements: repo.reserveStatements, refused, settleOnChain, recordIn, settle, resolveTx, resolveBatchTx, recoverDue, settlementQueue } as const
  }),
  dependencies: [PaymentVerifier.Default, PaymentsRepo.Default, TreasuryWriter.Default, MachineHost.Default, Settler.Default, AccountDeployer.Default]
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
