// How the host runs a dispute's machine: the escalation timer, the timeline, the resolution's money (through the
// execution's machine, same transaction; a channel-paid call's share back into its channel), reputation and
// dispute.resolved.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { disputeMachine } from "../../machines/dispute.js"
import type { DisputeRefundTo } from "../../machines/executionModel.js"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot } from "../../machines/step.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { ChannelsRepo } from "../channels/Repo.js"
import { Outbox } from "../outbox/Outbox.js"
import { Reputation } from "../reputation/Reputation.js"
import { type DisputeRow, DisputesRepo } from "./Repo.js"

const TimerEvent = Schema.Struct({ type: Schema.Literal("RESPONSE_DUE"), at: Schema.Number })

export type DisputeSpec = MachineSpec<typeof disputeMachine, DisputeRow, "noteResponse">

export class DisputeMachine extends Effect.Service<DisputeMachine>()("disputes/DisputeMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* DisputesRepo
    const outbox = yield* Outbox
    const reputation = yield* Reputation
    const channels = yield* ChannelsRepo

    /**
     * Where the client's share of a channel-paid call goes (docs/settlement.md "Disputes on channel calls"): back into
     * the channel while no claim took the charge, nowhere when the payer's money left the channel unclaimed, else (a
     * claimed charge, any other payment) to the payer's wallet (undefined). The answer holds the channel row's lock to
     * the end of this transaction: no claim can take the charge before the execution's step lowers it.
     */
    const channelRefundOf = (executionId: string, share: bigint) =>
      share === 0n
        ? Effect.succeed(undefined)
        : Effect.map(channels.disputeRefund(executionId, share, false), ({ outcome }): DisputeRefundTo | undefined =>
          outcome === "channel" ? "channel" : outcome === "written_off" ? "writtenOff" : undefined)

    const spec: DisputeSpec = {
      machine: disputeMachine,
      pure: ["noteResponse"],
      lock: repo.lock,
      snapshot: (row) =>
        isPersistedSnapshot(row.machineSnapshot)
          ? row.machineSnapshot
          : { value: row.status, context: { respondBy: row.respondBy.getTime(), responded: row.agentResponse !== null } },
      actions: {
        scheduleResponseDue: ({ at }, { schedule }) => schedule({ type: "RESPONSE_DUE", at }),
        cancelResponseDue: (_, { cancel }) => cancel("RESPONSE_DUE"),
        recordEscalation: (_, { row, event }) =>
          repo.addTimeline(row.id, "escalated", "platform", { reason: "the agent did not respond within 48 hours", respondBy: row.respondBy.toISOString() }, event.at),
        settle: ({ clientShare }, { row, event, deliver }) =>
          Effect.gen(function* () {
            const refundTo = yield* channelRefundOf(row.executionId, BigInt(clientShare))
            const delivered = yield* deliver("execution", row.executionId, {
              type: "DISPUTE_RESOLVED",
              at: event.at,
              disputeId: row.id,
              clientShare,
              ...(refundTo === undefined ? {} : { refundTo })
            })
            // The execution holds the frozen money: if it does not take the resolution, nothing may be recorded.
            if (Option.isNone(delivered) || !delivered.value.changed) {
              return yield* Effect.dieMessage(`dispute ${row.id}: execution ${row.executionId} did not take the resolution`)
            }
          }),
        adjustReputation: ({ delta }, { row, event }) =>
          reputation.recordDispute({ agentId: row.agentId, disputeId: row.id, executionId: row.executionId, delta, forAgent: delta > 0, at: event.at }),
        announceResolution: ({ resolution, reputationDelta }, { row, event }) =>
          Effect.gen(function* () {
            const clientRefund = event.type === "RESOLVE" ? BigInt(event.clientShare) : 0n
            const details = {
              resolution,
              clientRefund: formatUsdc(clientRefund),
              agentAmount: formatUsdc(row.amount - clientRefund),
              ...(event.type === "RESOLVE" ? { notes: event.notes, resolvedBy: event.by } : {})
            }
            yield* repo.addTimeline(row.id, "resolved", event.type === "RESOLVE" ? event.by : "platform", details, event.at)
            yield* outbox.emit("dispute.resolved", row.agentId, {
              disputeId: row.id,
              transactionId: row.transactionId,
              resolution,
              reputationDelta,
              clientRefund: formatUsdc(clientRefund)
            })
          })
      },
      save: (id, _row, step, event) =>
        sql`UPDATE disputes SET ${sql.update({
          status: step.state === "escalated" || step.state === "resolved_agent" || step.state === "resolved_client" || step.state === "resolved_split"
            ? step.state
            : "open",
          machineSnapshot: JSON.stringify(step.persisted),
          updatedAt: new Date(event.at),
          ...(event.type === "RESPONSE_DUE" ? { escalatedAt: new Date(event.at), escalationReason: "no agent response within 48 hours" } : {}),
          ...(event.type === "RESOLVE"
            ? { clientRefund: event.clientShare, resolutionNotes: event.notes, resolvedBy: event.by, resolvedAt: new Date(event.at) }
            : {})
        })} WHERE id = ${id}`.pipe(Effect.asVoid),
      timerEvent: (stored) => Option.getRight(Schema.decodeUnknownEither(TimerEvent)(stored))
    }
    return { spec } as const
  }),
  dependencies: [DisputesRepo.Default, Outbox.Default, Reputation.Default, ChannelsRepo.Default]
}) {}
