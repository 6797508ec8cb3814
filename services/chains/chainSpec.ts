// How the host runs a chain's machine: its durable timeout, and its end (the outcome, the unspent budget refunded on
// chain once or voided when the root payment failed, chain.completed), all in the transaction of the step.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { CHAIN_TIMEOUT_MS, type ChainContext, chainMachine, type ChainPayment } from "../../machines/chain.js"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot, type PersistedSnapshot } from "../../machines/step.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { ChannelsRepo } from "../channels/Repo.js"
import { restoreStatement } from "../limits/statements.js"
import { RefundsRepo } from "../refunds/Repo.js"
import { ChainsRepo, type ChainStatus, type LockedChain } from "./Repo.js"

const TimerEvent = Schema.Struct({ type: Schema.Literal("TIMEOUT"), at: Schema.Number })

const paymentOf = (status: string): ChainPayment => (status === "settled" ? "settled" : status === "failed" ? "failed" : "pending")

/** The stored snapshot with the facts read under the lock in place of the stored copies. */
const snapshotOf = (row: LockedChain): PersistedSnapshot => {
  const stored: PersistedSnapshot = isPersistedSnapshot(row.machineSnapshot)
    ? row.machineSnapshot
    : { value: row.status === "pending" || row.status === "running" ? row.status : "ended", context: { deadline: row.startedAt.getTime() + CHAIN_TIMEOUT_MS } }
  const context: ChainContext = {
    deadline: typeof stored.context === "object" && stored.context !== null && "deadline" in stored.context && typeof stored.context.deadline === "number"
      ? stored.context.deadline
      : row.startedAt.getTime() + CHAIN_TIMEOUT_MS,
    rootAnswered: row.facts.rootStatus !== "pending",
    inFlight: row.facts.inFlight,
    payment: paymentOf(row.facts.paymentStatus)
  }
  return { value: stored.value, context }
}

/**
 * The outcome (docs/chains.md): failed when the root did not complete (or was never paid for), partial when it completed
 * but a sub-call failed, completed when every call did.
 */
export const chainOutcome = (payment: ChainPayment, statuses: ReadonlyArray<{ readonly depth: number; readonly status: string }>): ChainStatus => {
  const root = statuses.find((s) => s.depth === 0)
  if (payment === "failed" || root === undefined || root.status !== "completed") return "failed"
  return statuses.every((s) => s.status === "completed") ? "completed" : "partial"
}

export type ChainSpec = MachineSpec<typeof chainMachine, LockedChain>

export class ChainMachine extends Effect.Service<ChainMachine>()("chains/ChainMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ChainsRepo
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const refunds = yield* RefundsRepo
    const channels = yield* ChannelsRepo

    /**
     * A budget bought with a channel voucher (services/executions/channeled.ts): the root's charge was the whole budget
     * and stayed open while the chain ran; now it keeps what the chain spent and the rest goes back to the channel
     * (its charged total lowered, the claim takes only the spent part), the ledger moving the unspent budget back into
     * the channel's receivable. If the payer's money left the channel meanwhile (the charge written off), the unspent
     * part lowers that loss instead.
     */
    const returnToChannel = (row: LockedChain, left: bigint) =>
      Effect.gen(function* () {
        const kept = yield* channels.keep(row.rootExecutionId, row.totalBudget - left)
        if (left === 0n) return
        yield* ledger.transfer({
          kind: "chain_channel_return",
          movements: [{ debit: Accounts.chainBudgets, credit: kept.outcome === "kept" ? Accounts.channelReceivable : Accounts.channelLosses, amount: left }],
          paymentId: row.paymentId,
          agentId: row.rootAgentId,
          subjectId: row.id
        }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
        // As a refund of the unspent budget would: it no longer counts against the payer's spending limits.
        yield* restoreStatement(sql, { paymentId: row.paymentId, source: `chain:${row.id}`, amount: left })
      })

    const spec: ChainSpec = {
      machine: chainMachine,
      pure: [],
      lock: repo.lock,
      snapshot: snapshotOf,
      actions: {
        scheduleTimeout: ({ at }, { schedule }) => schedule({ type: "TIMEOUT", at }),
        cancelTimeout: (_, { cancel }) => cancel("TIMEOUT"),
        finish: (_, { row, event }) =>
          Effect.gen(function* () {
            const statuses = yield* sql<{ depth: number; status: string }>`SELECT depth, status FROM executions WHERE chain_id = ${row.id}`
            const payment = paymentOf(row.facts.paymentStatus)
            const status = chainOutcome(payment, statuses)
            const left = row.remaining
            if (Option.isSome(yield* channels.channelOfPayment(row.paymentId))) {
              yield* returnToChannel(row, left)
            } else if (left > 0n) {
              // Settled: the unspent budget is the payer's, sent back on chain once (one refund row per chain). Never
              // settled: it was never ours; the receivable it was booked against is written off with it.
              yield* ledger.transfer({
                kind: payment === "settled" ? "chain_refund_owed" : "chain_void",
                movements: [{ debit: Accounts.chainBudgets, credit: payment === "settled" ? Accounts.refundsPayable : Accounts.settlementReceivable, amount: left }],
                paymentId: row.paymentId,
                agentId: row.rootAgentId,
                subjectId: row.id
              }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
              if (payment === "settled") yield* refunds.createForChain({ chainId: row.id, paymentId: row.paymentId, to: row.payer, amount: left })
            }
            // A channel-funded chain's unspent budget went back into the channel: refunded, though not on chain.
            yield* sql`UPDATE chains SET status = ${status}, remaining = 0, refund_amount = ${payment === "settled" ? left.toString() : "0"},
                       completed_at = ${new Date(event.at)} WHERE id = ${row.id}`
            yield* outbox.emit("chain.completed", row.rootAgentId, {
              chainId: row.id,
              status,
              nodeCount: statuses.length,
              totalBudget: formatUsdc(row.totalBudget),
              unspent: formatUsdc(left),
              refunded: formatUsdc(payment === "settled" ? left : 0n)
            })
          })
      },
      save: (id, _row, step, event) =>
        sql`UPDATE chains SET ${sql.update({
          machineSnapshot: JSON.stringify(step.persisted),
          updatedAt: new Date(event.at),
          ...(step.state === "pending" || step.state === "running" ? { status: step.state } : {})
        })} WHERE id = ${id}`.pipe(Effect.asVoid),
      timerEvent: (stored) => Option.getRight(Schema.decodeUnknownEither(TimerEvent)(stored))
    }
    return { spec } as const
  }),
  dependencies: [ChainsRepo.Default, Ledger.Default, Outbox.Default, RefundsRepo.Default, ChannelsRepo.Default]
}) {}
