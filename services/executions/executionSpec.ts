// How the host runs an execution's machine: where the held money goes (ledger transfers with the escrow's status), the
// outbox events, scores once paid, durable timers and the callback post, all in the transaction of the step.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { type ExecutionContext, type ExecutionEvent, executionMachine, executionStatus } from "../../machines/execution.js"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot, type PersistedSnapshot, type Step } from "../../machines/step.js"
import { ChainBudgetReturns } from "../../src/domain/Funding.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { ExecutionCallbacks } from "../webhooks/Callbacks.js"
import { Accounts, Ledger, type Movement } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { restoreStatement } from "../limits/statements.js"
import { RefundsRepo, retryNowStatement } from "../refunds/Repo.js"
import { ChannelsRepo } from "../channels/Repo.js"
import { Outcomes } from "../reputation/Outcomes.js"
import { clientShareAccount, freezeHeld, freezeReleased, releaseWithDebt, resolve } from "../disputes/money.js"
import { debtOf, debtStatement } from "../disputes/Repo.js"
import { type EscrowStatus, type ExecutionRow, ExecutionsRepo, type LockedExecution } from "./Repo.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { CALLBACK_STATES, forCallback } from "./View.js"
import { makeChannelReturns } from "./channelReturns.js"

const TimerEvent = Schema.Struct({ type: Schema.Literal("RETRY_WINDOW_CLOSED", "RELEASE_DUE", "AGENT_DEADLINE"), at: Schema.Number })

/**
 * Snapshots stored before a context field existed get its initial value; `frozen` is the agent's suspension, read with
 * the row under its lock (a suspension committed before this step freezes it; one committed after comes too late for it).
 */
const snapshotOf = (row: ExecutionRow): PersistedSnapshot => {
  const frozen = row.agentStatus === "suspended"
  if (!isPersistedSnapshot(row.machineSnapshot)) return { value: row.state, context: { unscored: [], chained: false, credit: false, frozen } }
  const context = row.machineSnapshot.context
  return {
    value: row.machineSnapshot.value,
    context: typeof context === "object" && context !== null ? { unscored: [], chained: false, credit: false, ...context, frozen } : context
  }
}

/** The row's columns an event changes (the agent's output or error, and what the machine derived). */
const columnsOf = (step: Step<typeof executionMachine>, event: ExecutionEvent) => {
  const context: ExecutionContext = step.snapshot.context
  const status = executionStatus(step.state, context)
  return {
    status,
    state: step.state,
    attempts: context.attempts,
    retryUntil: context.retryUntil === null ? null : new Date(context.retryUntil),
    ...(event.type === "AGENT_SUCCEEDED"
      ? { executionTimeMs: event.durationMs ?? null, completedAt: new Date(event.at), error: null, errorKind: null }
      : {}),
    ...(event.type === "AGENT_FAILED" ? { error: event.error.slice(0, 2000), errorKind: event.kind ?? null, executionTimeMs: event.durationMs ?? null } : {}),
    ...(event.type === "RETRY" ? { error: null, errorKind: null } : {})
  }
}

/** The execution as a step leaves it (escrow and refund columns as they were locked: no step reads them back). */
const nextRow = (row: LockedExecution, step: Step<typeof executionMachine>, event: ExecutionEvent): LockedExecution => ({
  ...row,
  ...columnsOf(step, event),
  ...(event.type === "AGENT_SUCCEEDED" ? { output: event.output ?? null } : {}),
  machineSnapshot: step.persisted,
  settlementState: event.type === "PAYMENT_SETTLED" ? "settled" : event.type === "PAYMENT_FAILED" ? "failed" : row.settlementState
})

/** Rows the steps of an open unit-of-work transaction left (for the caller that needs the result: no reload). */
const stepped = new WeakMap<UnitOfWork.Unit, Map<string, LockedExecution>>()

/** The execution as the current unit-of-work transaction has stepped it so far (none outside one, or if not stepped). */
export const steppedExecution = (id: string) =>
  Effect.map(UnitOfWork.current, (unit) => Option.flatMap(unit, (u) => Option.fromNullable(stepped.get(u)?.get(id))))

export type ExecutionSpec = MachineSpec<
  typeof executionMachine,
  LockedExecution,
  "openRetryWindow" | "startAttempt" | "markSettled" | "markPaymentFailed" | "queueScore" | "clearScores"
>

export class ExecutionMachine extends Effect.Service<ExecutionMachine>()("executions/ExecutionMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ExecutionsRepo
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const outcomes = yield* Outcomes
    const refunds = yield* RefundsRepo
    const callbacks = yield* ExecutionCallbacks
    const chainBudgets = yield* ChainBudgetReturns
    const returns = yield* makeChannelReturns

    /** One movement of an execution's escrow: the balanced ledger transfer and the escrow's new status, together. */
    const moveEscrow = (row: ExecutionRow, kind: string, status: EscrowStatus, at: number, movements: ReadonlyArray<Movement>) =>
      Effect.zipRight(
        ledger.transfer({ kind, movements, paymentId: row.paymentId, agentId: row.agentId, subjectId: row.id }).pipe(
          Effect.catchTag("LedgerInvariantError", Effect.die)
        ),
        repo.setEscrow(row.escrowId, status, at)
      )

    const moneyOf = (row: ExecutionRow) => ({
      agentId: row.agentId,
      price: row.price,
      platformPart: row.platformFee + row.platformCut,
      agentPart: row.agentEarnings
    })

    // Account rows are locked FOR NO KEY UPDATE, never FOR UPDATE: a concurrent ledger insert holds FOR KEY SHARE on
    // them (its foreign-key check) before its balance trigger updates them, and FOR UPDATE conflicts with that lock
    // while the trigger's own update does not (two releases for one agent deadlocked that way).

    /** The agent's outstanding debt, locking its account row only when there is one (most agents never have a debt row). */
    const owedBy = (agentId: string) =>
      Effect.map(
        sql<{ balance: string }>`SELECT balance::text AS balance FROM ledger_accounts WHERE id = ${Accounts.agentDebt(agentId)} AND balance > 0 FOR NO KEY UPDATE`,
        (rows) => BigInt(rows[0]?.balance ?? "0")
      )

    /**
     * escrow.released with the agent's new available balance, read in the event's own statement under the account row's
     * lock (the latest committed balance, not the statement's snapshot) plus what the not yet flushed writes of this
     * transaction add to it: no separate read on the request path.
     */
    const announceRelease = (row: ExecutionRow, amount: bigint) =>
      Effect.gen(function* () {
        const account = Accounts.agentAvailable(row.agentId)
        const pending = yield* UnitOfWork.pendingSum(account)
        yield* outbox.emitComputed("escrow.released", row.agentId, { transactionId: row.transactionId, amount: formatUsdc(amount) }, [[
          "newAvailableBalance",
          sql`((-(coalesce((SELECT balance FROM ledger_accounts WHERE id = ${account} FOR NO KEY UPDATE), 0) + ${pending.toString()}::bigint))::numeric / 1000000)::numeric(30, 6)::text`
        ]])
      })

    const spec: ExecutionSpec = {
      machine: executionMachine,
      pure: ["openRetryWindow", "startAttempt", "markSettled", "markPaymentFailed", "queueScore", "clearScores"],
      lock: repo.lock,
      guarded: repo.guarded,
      snapshot: snapshotOf,
      actions: {
        recordOutcome: ({ success }, { row, event }) =>
          success
            ? outbox.emit("execution.completed", row.agentId, {
              requestId: row.id,
              agentId: row.agentId,
              capabilityId: row.capabilityId,
              executionTime: event.type === "AGENT_SUCCEEDED" ? event.durationMs ?? null : row.executionTimeMs,
              earnings: formatUsdc(row.agentEarnings)
            })
            : outbox.emit("execution.failed", row.agentId, {
              requestId: row.id,
              agentId: row.agentId,
              capabilityId: row.capabilityId,
              error: event.type === "AGENT_FAILED" ? event.error : event.type === "AGENT_DEADLINE" ? "the attempt died without a result" : row.error ?? "failed"
            }),
        // Facts for the fold worker (no lock on the agent's row here): only root executions move reputation; chained
        // sub-calls count for health and the counters only.
        scoreOutcomes: ({ outcomes: scored }, { row, event }) =>
          scored.length === 0
            ? Effect.void
            : UnitOfWork.append(sql, ["agent_outcomes"], outcomes.statement(scored.map((success) => ({ agentId: row.agentId, executionId: row.id, scored: row.depth === 0, success, at: event.at })))),
        scheduleTimer: ({ event, at }, { schedule }) => schedule({ type: event, at }),
        cancelTimer: ({ event }, { cancel }) => cancel(event),
        releaseEscrow: (_, { row, event }) =>
          Effect.gen(function* () {
            // An agent that owes a debt (disputed earnings it had withdrawn) repays it from these earnings first (read
            // again under the debt row's lock, so concurrent releases never repay more than is owed).
            const debt = row.agentDebt === null ? 0n : yield* owedBy(row.agentId)
            yield* moveEscrow(row, "escrow_release", "released", event.at, [
              { debit: Accounts.escrow, credit: Accounts.platformRevenue, amount: row.platformFee + row.platformCut },
              ...releaseWithDebt(row.agentId, row.agentEarnings, debt)
            ])
            yield* announceRelease(row, row.agentEarnings)
          }),
        startRefund: (_, { row, event }) =>
          Effect.zipRight(
            moveEscrow(row, "refund_owed", "refunding", event.at, [{ debit: Accounts.escrow, credit: Accounts.refundsPayable, amount: row.price }]),
            refunds.create({ executionId: row.id, paymentId: row.paymentId, to: row.payer, amount: row.price })
          ),
        confirmRefund: ({ txHash }, { row, event }) =>
          Effect.zipRight(
            repo.setEscrow(row.escrowId, "refunded", event.at),
            outbox.emit("execution.refunded", row.agentId, {
              requestId: row.id,
              amount: formatUsdc(event.type === "REFUND_CONFIRMED" && event.amount !== undefined ? BigInt(event.amount) : row.price),
              txHash
            })
          ),
        freezeForDispute: ({ released }, { row, event }) =>
          Effect.gen(function* () {
            if (event.type !== "DISPUTE_OPENED") return yield* Effect.dieMessage(`freezeForDispute on ${event.type}`)
            const money = moneyOf(row)
            let debt = 0n
            if (released) {
              yield* ledger.openDebtAccount(row.agentId)
              // Read under the account row's lock: a concurrent withdrawal cannot spend what the dispute takes back.
              const [account] = yield* sql<{ available: string }>`
                SELECT (-balance)::text AS available FROM ledger_accounts WHERE id = ${Accounts.agentAvailable(row.agentId)} FOR NO KEY UPDATE`
              const frozen = freezeReleased(money, BigInt(account?.available ?? "0"))
              debt = frozen.debt
              yield* moveEscrow(row, "dispute_freeze", "disputed", event.at, frozen.movements)
            } else {
              yield* moveEscrow(row, "dispute_freeze", "disputed", event.at, freezeHeld(money))
            }
            yield* debtStatement(sql, event.disputeId, debt)
            yield* outbox.emit("escrow.disputed", row.agentId, {
              disputeId: event.disputeId,
              transactionId: row.transactionId,
              escrowId: row.escrowId,
              amount: formatUsdc(row.price),
              agentEarnings: formatUsdc(row.agentEarnings),
              wasReleased: released,
              ...(debt > 0n ? { agentDebt: formatUsdc(debt) } : {})
            })
          }),
        // A channel-paid call's share settles here (into the channel, or against its write-off); any other goes to a refund.
        settleDispute: ({ clientShare, refundTo }, { row, event }) =>
          Effect.gen(function* () {
            if (event.type !== "DISPUTE_RESOLVED") return yield* Effect.dieMessage(`settleDispute on ${event.type}`)
            const share = BigInt(clientShare)
            const outcome = resolve(moneyOf(row), share, yield* debtOf(sql, event.disputeId), clientShareAccount(refundTo))
            const escrow = share === 0n ? "released" : refundTo === undefined ? "refunding" : "refunded"
            yield* moveEscrow(row, "dispute_resolution", escrow, event.at, outcome.movements)
            if (share > 0n && refundTo !== undefined) yield* returns.disputeShare(row, share, refundTo)
            else if (share > 0n) yield* refunds.create({ executionId: row.id, paymentId: row.paymentId, to: row.payer, amount: share })
            if (outcome.toAgent > 0n) yield* announceRelease(row, outcome.toAgent)
          }),
        returnToChain: (_, { row, event }) =>
          Effect.gen(function* () {
            if (row.chainId === null) return yield* Effect.dieMessage(`returnToChain on ${row.id}, which is not in a chain`)
            // Under the chain row's lock: the chain's end (which refunds what remains) sees this give-back or none of it.
            const returned = yield* chainBudgets.giveBack(row.chainId, row.price)
            if (Option.isNone(returned)) {
              // The chain already ended (it ends only when no sub-call is in flight, so this is a safety net): the payer
              // gets this reservation back on its own.
              yield* moveEscrow(row, "refund_owed", "refunding", event.at, [{ debit: Accounts.escrow, credit: Accounts.refundsPayable, amount: row.price }])
              return yield* refunds.create({ executionId: row.id, paymentId: row.paymentId, to: row.payer, amount: row.price })
            }
            const chain = returned.value
            yield* moveEscrow(row, "chain_return", "returned", event.at, [{ debit: Accounts.escrow, credit: Accounts.chainBudgets, amount: row.price }])
            yield* outbox.emit("chain.partial_failure", chain.rootAgentId, {
              chainId: row.chainId,
              requestId: row.id,
              transactionId: row.transactionId,
              agentId: row.agentId,
              depth: row.depth,
              error: event.type === "AGENT_FAILED" ? event.error : "the sub-call died without a result",
              returned: formatUsdc(row.price),
              remainingBudget: formatUsdc(chain.remaining)
            })
          }),
        // A failed call paid from credit or a channel: its price back where it came from (the credit, or the channel's
        // charge given back before any claim can take it), and to the payer's spending limits' day.
        returnToCredit: (_, { row, event }) =>
          Effect.gen(function* () {
            const back = yield* returns.failedCall(row)
            yield* moveEscrow(row, back.kind, "returned", event.at, [{ debit: Accounts.escrow, credit: back.credit, amount: row.price }])
            yield* restoreStatement(sql, { paymentId: row.paymentId, source: `credit:${row.id}`, amount: row.price })
          }),
        // Only a refund waiting for its next try (a failed attempt) moves; one in flight is the treasury worker's.
        retryRefund: (_, { row, event }) =>
          retryNowStatement(sql, row.id, event.at).pipe(Effect.asVoid),
        voidEscrow: (_, { row, event }) =>
          moveEscrow(row, "escrow_void", "void", event.at, [{ debit: Accounts.escrow, credit: Accounts.settlementReceivable, amount: row.price }])
      },
      save: (id, row, step, event) =>
        Effect.gen(function* () {
          const columns = columnsOf(step, event)
          const output = event.type === "AGENT_SUCCEEDED" ? { output: event.output ?? null } : {}
          yield* UnitOfWork.update(sql, "executions", id, {
            ...columns,
            ...(event.type === "AGENT_SUCCEEDED" ? { output: JSON.stringify(event.output ?? null) } : {}),
            machineSnapshot: JSON.stringify(step.persisted),
            updatedAt: new Date(event.at)
          })
          const unit = yield* UnitOfWork.current
          if (Option.isSome(unit)) {
            const rows = stepped.get(unit.value) ?? new Map<string, LockedExecution>()
            rows.set(id, nextRow(row, step, event))
            stepped.set(unit.value, rows)
          }
          const context: ExecutionContext = step.snapshot.context
          if (step.state === "completed.held" && context.releaseAt !== null) yield* repo.setReleaseAt(row.escrowId, context.releaseAt)
          if (row.callbackUrl !== null && step.from !== step.state && CALLBACK_STATES.has(step.state)) {
            const next = { ...row, ...columns, ...output, settlementState: event.type === "PAYMENT_SETTLED" ? "settled" as const : row.settlementState }
            yield* callbacks.ready(id, columns.status === "completed" ? "execution.completed" : "execution.failed", forCallback(next))
          }
        }),
      next: nextRow,
      timerEvent: (stored) => Option.getRight(Schema.decodeUnknownEither(TimerEvent)(stored)),
      historyEvent: (event) => (event.type === "AGENT_SUCCEEDED" ? { type: event.type, at: event.at, releaseDelayMs: event.releaseDelayMs, durationMs: event.durationMs } : event)
    }
    return { spec } as const
  }),
  dependencies: [ExecutionsRepo.Default, Ledger.Default, Outbox.Default, Outcomes.Default, RefundsRepo.Default, ExecutionCallbacks.Default, ChannelsRepo.Default]
}) {}
