// Where money paid from a channel (or the payer's credit) goes back without a transfer: a failed call's price (the
// channel's charge given back before any claim, a chain root's price back to its chain's budget, or the credit) and a
// dispute's client share on a channel-paid call (docs/settlement.md "Disputes on channel calls", "Chain budgets paid by
// channel"): taken off the call's unclaimed charge, or set against the channel's write-off. All in the step's transaction.
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { DisputeRefundTo } from "../../machines/executionModel.js"
import { ChainBudgetReturns } from "../../src/domain/Funding.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { ChannelsRepo } from "../channels/Repo.js"
import { Accounts } from "../ledger/Ledger.js"
import { restoreStatement } from "../limits/statements.js"
import { Outbox } from "../outbox/Outbox.js"
import { creditAccount } from "../remainders/Repo.js"
import type { ExecutionRow } from "./Repo.js"

export const makeChannelReturns = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const channels = yield* ChannelsRepo
  const outbox = yield* Outbox
  const chainBudgets = yield* ChainBudgetReturns

  /**
   * A failed call paid from a channel or the credit: the ledger transfer's kind and the account its price goes back to
   * from the escrow, with the channel's charge given back (charged total lowered) where there is one.
   */
  const failedCall = (row: ExecutionRow) =>
    Effect.gen(function* () {
      if (Option.isNone(yield* channels.channelOfPayment(row.paymentId))) return { kind: "credit_return", credit: creditAccount(row.payer) }
      if (row.chainId !== null) {
        // A chain's root charged the whole budget: its price goes back to the budget, which the chain's end returns to
        // the channel. A chain ends only once its root answered (machines/chain.ts `quiet`): it cannot have ended.
        if (Option.isNone(yield* chainBudgets.giveBack(row.chainId, row.price))) {
          return yield* Effect.dieMessage(`failed chain root ${row.id}: its chain ${row.chainId} ended before it answered`)
        }
        return { kind: "chain_return", credit: Accounts.chainBudgets }
      }
      yield* channels.keep(row.id, 0n)
      return { kind: "channel_return", credit: Accounts.channelReceivable }
    })

  /** A dispute's client share, with the ledger's transfer of it from disputes held (services/disputes/money.ts). */
  const disputeShare = (row: ExecutionRow, share: bigint, refundTo: DisputeRefundTo) =>
    Effect.gen(function* () {
      if (refundTo === "channel") {
        const taken = yield* channels.disputeRefund(row.id, share, true)
        // The resolution chose the channel under the channel row's lock, held since: no claim can have taken the charge.
        if (taken.outcome !== "channel") {
          return yield* Effect.dieMessage(`dispute refund of ${row.id} into its channel answered ${taken.outcome}`)
        }
      }
      yield* restoreStatement(sql, { paymentId: row.paymentId, source: `execution:${row.id}`, amount: share })
      yield* outbox.emit("execution.refunded", row.agentId, { requestId: row.id, amount: formatUsdc(share), txHash: null, refundedTo: refundTo })
    })

  return { failedCall, disputeShare } as const
})
