// A dispute's client share on a channel-paid call, settled in the resolution's own step (docs/settlement.md "Disputes on
// channel calls"): taken off the call's unclaimed charge (the payer's channel balance keeps it, the next claim takes
// less) or, when the payer's money left the channel before any claim, set against that write-off. Either way no
// transfer follows: the payer's spending limits get the share back and `execution.refunded` says where it went.
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { DisputeRefundTo } from "../../machines/executionModel.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { ChannelsRepo } from "../channels/Repo.js"
import { restoreStatement } from "../limits/statements.js"
import { Outbox } from "../outbox/Outbox.js"
import type { ExecutionRow } from "./Repo.js"

export const makeChannelDisputeRefund = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const channels = yield* ChannelsRepo
  const outbox = yield* Outbox

  /** In the step's transaction, with the ledger's transfer of `share` from disputes held (services/disputes/money.ts). */
  return (row: ExecutionRow, share: bigint, refundTo: DisputeRefundTo) =>
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
})
