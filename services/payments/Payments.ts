// Accepted payments: the reservation (once-only), settlement on chain through the treasury writer (or a facilitator),
// front-run detection from the chain's own record, and recovery of what a crash or an RPC fault interrupted.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Option, Schedule } from "effect"
import { encodeFunctionData, getAddress, type Hex, parseSignature } from "viem"
import { Chain } from "../../layers/Chain.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { recordSettlement } from "../../layers/observability/Metrics.js"
import { PaymentVerifier } from "../../layers/PaymentVerifier.js"
import { PaymentRejected, type RejectionReason, type VerifiedPayment } from "../../layers/x402/payment.js"
import { MachineHost } from "../../machines/Host.js"
import type { PaymentRequirements } from "../../layers/x402/requirements.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import { authorizationPayment, ChainReadError, movedExactly } from "../treasury/chainReads.js"
import { MoneyFaults } from "../treasury/Faults.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { batch } from "../sql/Batch.js"
import { PAYMENT_LEASE_MS, type PaymentPurpose, type PaymentRow, PaymentsRepo, verifiedOf } from "./Repo.js"

/** The outcome of trying to settle now. */
export type SettleOutcome =
  | { readonly _tag: "Settled"; readonly txHash: string; readonly block: bigint | null }
  | { readonly _tag: "Failed"; readonly reason: RejectionReason | "rpc_error"; readonly message: string }
  | { readonly _tag: "Pending"; readonly message: string }

/** A settlement attempt: its outcome, and the treasury transaction's own outcome to record with it. */
export interface Settlement {
  readonly outcome: SettleOutcome
  readonly tx: Option.Option<{ readonly id: string; readonly outcome: Exclude<TxOutcome, { _tag: "Pending" }> }>
}

/** Gas for one transferWithAuthorization; set explicitly to skip an estimate round trip per settlement. */
const SETTLEMENT_GAS = 150_000n

const pending = (message: string): Settlement => ({ outcome: { _tag: "Pending", message }, tx: Option.none() })

export class Payments extends Effect.Service<Payments>()("payments/Payments", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const verifier = yield* PaymentVerifier
    const repo = yield* PaymentsRepo
    const writer = yield* TreasuryWriter
    const host = yield* MachineHost
    const faults = yield* MoneyFaults

    /** A unique key of payments was hit: this authorization (or this very header) was already used. */
    const alreadyUsed = (error: SqlError.SqlError): Effect.Effect<never, PaymentRejected | SqlError.SqlError> =>
      isUniqueViolation(error, "payments_authorization_key") || isUniqueViolation(error, "payments_header_key")
        ? Effect.fail(new PaymentRejected({ reason: "payment_already_used", message: "this payment authorization was already used" }))
        : Effect.fail(error)

    /** Claims the authorization for a purpose inside the caller's transaction (the unique (asset, payer, nonce) key). */
    const reserve = (p: VerifiedPayment, purpose: PaymentPurpose, subjectId: string) =>
      Effect.gen(function* () {
        const reservation = repo.reserveStatements(p, purpose, subjectId, yield* Clock.currentTimeMillis)
        yield* batch(sql, reservation.statements)
        return reservation.id
      }).pipe(Effect.catchTag("SqlError", alreadyUsed))

    /**
     * What the chain says happened to an authorization whose own settlement did not confirm (reverted, dropped, or never
     * sent): paid to the treasury by anyone (a front-runner included) is settled with that hash; otherwise failed for
     * good, or worth another try.
     */
    const lookUp = (p: VerifiedPayment, tx: Settlement["tx"]): Effect.Effect<Settlement, ChainReadError> =>
      Effect.gen(function* () {
        const found = yield* authorizationPayment(chain, p.payer, p.nonce, chain.treasury, p.amount)
        if (Option.isSome(found.payment)) {
          return { outcome: { _tag: "Settled", txHash: found.payment.value.txHash, block: found.payment.value.block }, tx }
        }
        if (found.used) {
          return { outcome: { _tag: "Failed", reason: "payment_already_used", message: "the authorization was used without paying the treasury" }, tx }
        }
        const now = BigInt(Math.floor((yield* Clock.currentTimeMillis) / 1000))
        if (p.validBefore <= now) {
          return { outcome: { _tag: "Failed", reason: "invalid_exact_evm_payload_authorization_valid_before", message: "the authorization expired unsettled" }, tx }
        }
        const balance = yield* Effect.tryPromise({
          try: () => chain.publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [getAddress(p.payer)] }),
          catch: (error) => new ChainReadError({ message: `balance: ${String(error).slice(0, 200)}` })
        })
        if (balance < p.amount) {
          return { outcome: { _tag: "Failed", reason: "insufficient_funds", message: "the payer no longer holds the amount" }, tx }
        }
        return { outcome: { _tag: "Pending", message: "not settled yet; will try again" }, tx }
      })

    /** Turns our transaction's outcome into the payment's. */
    const resolve = (p: VerifiedPayment, txId: string, outcome: TxOutcome): Effect.Effect<Settlement, ChainReadError> => {
      if (outcome._tag === "Pending") return Effect.succeed(pending("the settlement transaction is not mined yet"))
      const tx = Option.some({ id: txId, outcome })
      if (outcome._tag === "Mined" && outcome.receipt.status === "success" && movedExactly(chain, outcome.receipt, p.payer, chain.treasury, p.amount)) {
        return Effect.succeed({ outcome: { _tag: "Settled", txHash: outcome.receipt.transactionHash, block: outcome.receipt.blockNumber }, tx })
      }
      return lookUp(p, tx)
    }

    const calldata = (p: VerifiedPayment): Hex => {
      const { r, s, v, yParity } = parseSignature(p.signature)
      return encodeFunctionData({
        abi: usdcAbi,
        functionName: "transferWithAuthorization",
        args: [getAddress(p.payer), getAddress(p.payTo), p.amount, p.validAfter, p.validBefore, p.nonce, Number(v ?? BigInt(yParity + 27)), r, s]
      })
    }

    /** Moves the money on chain and says what happened; records nothing but the treasury transaction itself. */
    const settleOnChain = (paymentId: string, p: VerifiedPayment, requirements: PaymentRequirements): Effect.Effect<Settlement> =>
      Effect.gen(function* () {
        yield* faults.beforeSettle(p)
        if (!writer.enabled) {
          const settled = yield* Effect.either(verifier.settle(p, requirements))
          if (settled._tag === "Right") return { outcome: { _tag: "Settled", txHash: settled.right, block: null }, tx: Option.none() } satisfies Settlement
          const error = settled.left
          return error.final
            ? { outcome: { _tag: "Failed", reason: error.reason, message: error.message }, tx: Option.none() } satisfies Settlement
            : pending(error.message)
        }
        const tx = yield* writer.submit({
          purpose: "settlement",
          subjectId: paymentId,
          to: chain.usdc.address,
          data: calldata(p),
          gas: SETTLEMENT_GAS,
          link: (txId) => repo.linkTreasuryTx(paymentId, txId)
        })
        const receipt = yield* writer.awaitReceipt(tx)
        return yield* resolve(p, tx.id, Option.match(receipt, { onNone: () => ({ _tag: "Pending" }) as const, onSome: (r) => ({ _tag: "Mined", receipt: r }) as const }))
      }).pipe(
        Effect.catchTags({
          TreasuryError: (e) => Effect.succeed(pending(e.message)),
          ChainReadError: (e) => Effect.succeed(pending(e.message)),
          // Nothing was stored (the nonce and the row roll back together) or only a machine step was lost: recovery retries.
          SqlError: (e) => Effect.succeed(pending(`database: ${e.message}`))
        }),
        recordSettlement,
        Effect.withSpan("Payments.settleOnChain")
      )

    /** Records a settlement in the payment's machine (and its treasury transaction's), inside the caller's transaction. */
    const recordIn = (paymentId: string, settlement: Settlement) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        if (Option.isSome(settlement.tx)) yield* writer.recordIn(settlement.tx.value.id, settlement.tx.value.outcome)
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
        Effect.withSpan("Payments.settle")
      )

    /** The treasury worker found our settlement transaction's fate (after a crash or a slow chain): record it. */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const payment = yield* repo.find(tx.subjectId)
        const outcome = yield* writer.observe(tx)
        if (outcome._tag === "Pending") return
        if (Option.isNone(payment) || payment.value.status === "settled" || payment.value.status === "failed") {
          return yield* sql.withTransaction(writer.recordIn(tx.id, outcome))
        }
        const settlement = yield* resolve(verifiedOf(payment.value), tx.id, outcome)
        // A dropped or reverted transaction whose authorization is still good is left to the recovery pass to resend.
        yield* sql.withTransaction(
          settlement.outcome._tag === "Pending" ? writer.recordIn(tx.id, outcome) : recordIn(payment.value.id, settlement)
        )
      })

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
        const found = yield* lookUp(p, Option.none())
        if (found.outcome._tag !== "Pending") return yield* sql.withTransaction(recordIn(row.id, found))
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
    }).pipe(Effect.withSpan("Payments.recoverDue"))

    return { reserve, reserveStatements: repo.reserveStatements, alreadyUsed, settleOnChain, recordIn, settle, resolveTx, recoverDue } as const
  }),
  dependencies: [PaymentVerifier.Default, PaymentsRepo.Default, TreasuryWriter.Default, MachineHost.Default]
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
