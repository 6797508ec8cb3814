// How the host runs a withdrawal's machine: the row and its snapshot, and what each step books: the payout against the
// treasury in its block, or the funds back to the agent; withdrawal.completed / withdrawal.failed in the same transaction.
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot, startMachine } from "../../machines/step.js"
import { withdrawalMachine } from "../../machines/withdrawal.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { WithdrawalsRepo, type WithdrawalRow } from "./Repo.js"

export type WithdrawalSpec = MachineSpec<typeof withdrawalMachine, WithdrawalRow, "noteError">

export class WithdrawalMachine extends Effect.Service<WithdrawalMachine>()("withdrawals/WithdrawalMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* WithdrawalsRepo
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    /** An unbalanced transfer is a bug, not a database fault. */
    const book = (input: Parameters<typeof ledger.transfer>[0]) =>
      ledger.transfer(input).pipe(Effect.catchTag("LedgerInvariantError", Effect.die), Effect.asVoid)
    const spec: WithdrawalSpec = {
      machine: withdrawalMachine,
      pure: ["noteError"],
      lock: repo.lock,
      snapshot: (row) => (isPersistedSnapshot(row.machineSnapshot) ? row.machineSnapshot : startMachine(withdrawalMachine, {}).persisted),
      actions: {
        bookPayout: ({ txHash, block }, { row }) =>
          book({
            kind: "withdrawal_paid",
            movements: [{ debit: Accounts.withdrawalsPayable, credit: Accounts.treasury, amount: row.netAmount }],
            agentId: row.agentId,
            subjectId: row.id,
            chainBlock: BigInt(block),
            txHash
          }),
        returnFunds: (_, { row }) =>
          book({
            kind: "withdrawal_returned",
            movements: [
              { debit: Accounts.withdrawalsPayable, credit: Accounts.agentAvailable(row.agentId), amount: row.netAmount },
              ...(row.fee > 0n ? [{ debit: Accounts.platformRevenue, credit: Accounts.agentAvailable(row.agentId), amount: row.fee }] : [])
            ],
            agentId: row.agentId,
            subjectId: row.id
          }),
        announce: ({ outcome }, { row, event }) =>
          outbox.emit(outcome === "completed" ? "withdrawal.completed" : "withdrawal.failed", row.agentId, {
            withdrawalId: row.id,
            agentId: row.agentId,
            amount: formatUsdc(row.amount),
            netAmount: formatUsdc(row.netAmount),
            destinationWallet: row.destinationWallet,
            ...(event.type === "PAID" ? { txHash: event.txHash } : {}),
            ...(event.type === "FAILED" ? { reason: event.reason } : {})
          })
      },
      save: (id, _row, step, event) =>
        sql`UPDATE withdrawals SET ${sql.update({
          status: step.state === "pending" || step.state === "processing" || step.state === "completed" ? step.state : "failed",
          machineSnapshot: JSON.stringify(step.persisted),
          ...(event.type === "SUBMITTED" ? { treasuryTxId: event.txId, lastError: null } : {}),
          ...(event.type === "PAID" ? { txHash: event.txHash, blockNumber: event.block, completedAt: new Date(event.at) } : {}),
          ...(event.type === "DROPPED" ? { treasuryTxId: null, lastError: event.reason, nextAttemptAt: new Date(event.at) } : {}),
          ...(event.type === "FAILED" ? { lastError: event.reason, completedAt: new Date(event.at) } : {})
        })} WHERE id = ${id}`.pipe(Effect.asVoid),
      timerEvent: () => Option.none()
    }
    return { spec } as const
  }),
  dependencies: [WithdrawalsRepo.Default, Ledger.Default, Outbox.Default]
}) {}
