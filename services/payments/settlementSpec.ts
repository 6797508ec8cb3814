// How the host runs the settlement machine of a payment: what a settled or failed payment does for its purpose
// (a registration activates its agent, an execution's escrow learns it is backed), booked with the block it was mined in.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option, Schema } from "effect"
import type { MachineSpec } from "../../machines/runner.js"
import { settlementMachine } from "../../machines/settlement.js"
import { AgentActivation } from "../agents/Activation.js"
import { Networks } from "../../layers/Networks.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { restoreStatement } from "../limits/statements.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { paymentSnapshot, type PaymentRow, PaymentsRepo } from "./Repo.js"

/**
 * What the payment moved (or would have): its amount; for an upto payment, what its call used once that is known (the
 * rest of its maximum went back when the call was charged, services/executions/metering.ts).
 */
const movedBy = (row: PaymentRow) => (row.purpose === "upto" ? row.uptoCharged ?? row.amount : row.amount)

const RetryDue = Schema.Struct({ type: Schema.Literal("RETRY_DUE"), at: Schema.Number })

export type SettlementSpec = MachineSpec<typeof settlementMachine, PaymentRow, "noteTxHash" | "noteReason">

export class SettlementMachine extends Effect.Service<SettlementMachine>()("payments/SettlementMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* PaymentsRepo
    const ledger = yield* Ledger
    const activation = yield* AgentActivation
    const networks = yield* Networks

    const spec: SettlementSpec = {
      machine: settlementMachine,
      pure: ["noteTxHash", "noteReason"],
      lock: repo.lock,
      guarded: repo.guarded,
      snapshot: paymentSnapshot,
      actions: {
        onSettled: ({ txHash }, { row, event, deliver }) =>
          Effect.gen(function* () {
            const block = event.type === "SETTLED" && event.block !== undefined && event.block !== null ? BigInt(event.block) : null
            if (row.purpose === "registration") return yield* activation.settled(row, txHash, block)
            // The accepted payment arrived on chain: the receivable becomes treasury money.
            yield* ledger.transfer({
              kind: "settlement",
              // The treasury of the payment's network (each network's is reconciled with its own chain).
              movements: [{ debit: networks.treasuryAccount(row.network), credit: Accounts.settlementReceivable, amount: movedBy(row) }],
              paymentId: row.id,
              subjectId: row.subjectId,
              chainBlock: block,
              txHash
            }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
            yield* deliver("execution", row.subjectId, { type: "PAYMENT_SETTLED", at: event.at })
          }),
        onFailed: ({ reason }, { row, event, deliver }) =>
          row.purpose === "registration"
            ? activation.failed(row)
            // Never charged: the payment no longer counts against the payer's spending limits.
            : Effect.zipRight(
              restoreStatement(sql, { paymentId: row.id, source: "settlement_failed", amount: movedBy(row) }),
              Effect.asVoid(deliver("execution", row.subjectId, { type: "PAYMENT_FAILED", at: event.at, reason }))
            ),
        // The due time is saved with the snapshot (next_attempt_at): the recovery worker is this machine's timer.
        scheduleRetry: () => Effect.void
      },
      save: (id, _row, step, event) =>
        Effect.gen(function* () {
          const context = step.snapshot.context
          // An operator's RETRY_NOW makes the payment due for the recovery worker at once.
          const nextAttemptAt = event.type === "FAILED_TRANSIENT" && typeof context.nextAttemptAt === "number"
            ? context.nextAttemptAt
            : event.type === "RETRY_NOW"
            ? event.at
            : null
          // In a unit of work (the paid path's final transaction) the update goes with its batch.
          yield* UnitOfWork.update(sql, "payments", id, {
            status: step.state,
            machineSnapshot: JSON.stringify(step.persisted),
            updatedAt: new Date(event.at),
            ...(event.type === "SETTLED" ? { txHash: event.txHash, settledAt: new Date(event.at) } : {}),
            ...(event.type === "FAILED_FINAL" || event.type === "UNUSED" ? { failureReason: event.reason } : {}),
            ...(event.type === "FAILED_TRANSIENT" ? { failureReason: event.error.slice(0, 500) } : {}),
            ...(nextAttemptAt === null ? {} : { nextAttemptAt: new Date(nextAttemptAt) })
          })
        }),
      timerEvent: (stored) => Option.getRight(Schema.decodeUnknownEither(RetryDue)(stored))
    }
    return { spec, now: Clock.currentTimeMillis } as const
  }),
  dependencies: [PaymentsRepo.Default, Ledger.Default, AgentActivation.Default]
}) {}
