// Operator levers: each delivers one event to its machine through the host (never writing a machine's state itself) and
// records who pulled it, why, and what it did, in the same transaction; a lever the actor's state does not take changes
// nothing, is recorded as refused, and answers 409 LEVER_NOT_APPLICABLE.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { type MachineEvents, MachineHost, type MachineKind } from "../../machines/Host.js"
import { Conflict, NotFound } from "../../src/domain/Errors.js"
import type { AgentId } from "../../src/domain/Ids.js"
import { AgentCache } from "../agents/AgentCache.js"
import { Agents } from "../agents/Agents.js"
import { retryOneNowStatement } from "../refunds/Repo.js"
import { DeliveryLog } from "../webhooks/DeliveryLog.js"
import { type ActionView, type OperatorIdentity, OperatorLog } from "./Actions.js"

const notApplicable = (action: ActionView, message: string, details: Record<string, unknown> = {}) =>
  new Conflict({ code: "LEVER_NOT_APPLICABLE", message, details: { state: action.from, actionId: action.id, ...details } })

export class Levers extends Effect.Service<Levers>()("operator/Levers", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const host = yield* MachineHost
    const log = yield* OperatorLog
    const agents = yield* Agents
    const cache = yield* AgentCache
    const deliveries = yield* DeliveryLog

    /** A refusal is committed (the record) before the 409 is answered. */
    const answer = <E>(
      outcome: { readonly action: ActionView; readonly refused: Option.Option<E> }
    ): Effect.Effect<ActionView, E> => Option.match(outcome.refused, { onNone: () => Effect.succeed(outcome.action), onSome: Effect.fail })

    /** One event to one actor, and its record, in one transaction. */
    const pull = <K extends MachineKind>(
      who: OperatorIdentity,
      lever: { readonly kind: K; readonly id: string; readonly action: string; readonly reason: string; readonly event: (at: number) => MachineEvents[K] }
    ) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const outcome = yield* sql.withTransaction(
          Effect.gen(function* () {
            const delivered = yield* host.deliver(lever.kind, lever.id, lever.event(at))
            if (Option.isNone(delivered)) return Option.none()
            const { changed, from, state } = delivered.value
            const action = yield* log.record(who, {
              action: lever.action,
              machine: lever.kind,
              actorId: lever.id,
              reason: lever.reason,
              outcome: changed ? "applied" : "refused",
              from,
              to: changed ? state : null,
              transitionId: changed ? yield* log.lastTransition(lever.kind, lever.id) : null,
              at
            })
            return Option.some({
              action,
              refused: changed ? Option.none() : Option.some(notApplicable(action, `a ${lever.kind} in state ${from ?? "?"} does not take ${lever.action}`))
            })
          })
        ).pipe(Effect.orDie)
        if (Option.isNone(outcome)) return yield* new NotFound({ code: "ACTOR_NOT_FOUND", message: `no ${lever.kind} ${lever.id}` })
        return yield* answer(outcome.value)
      }).pipe(Effect.withSpan("Levers.pull", { attributes: { kind: lever.kind, action: lever.action } }))

    /** Held executions of an agent with no release armed (their release was refused while it was suspended). */
    const heldUnarmed = (agentId: string) =>
      sql<{ id: string }>`
        SELECT e.id FROM executions e
        WHERE e.agent_id = ${agentId} AND e.state = 'completed.held'
          AND NOT EXISTS (SELECT 1 FROM machine_timers mt WHERE mt.machine = 'execution' AND mt.actor_id = e.id
                          AND mt.event_type = 'RELEASE_DUE' AND mt.fired_at IS NULL)
        ORDER BY e.id FOR UPDATE OF e`

    const rearm = (who: OperatorIdentity, ids: ReadonlyArray<{ readonly id: string }>, reason: string, at: number) =>
      Effect.forEach(ids, ({ id }) => host.deliver("execution", id, { type: "AGENT_REINSTATED", at, by: who.name, reason }), { discard: true })

    /**
     * Suspends (the agent leaves discovery, executions answer AGENT_NOT_FOUND, its money stops being released: a fact its
     * executions read), reinstates, or pauses an agent. Reinstatement re-arms every release refused meanwhile, in the same
     * transaction (executions locked before the agent row, the order execution steps take them in).
     */
    const setAgentStatus = (who: OperatorIdentity, agentId: AgentId, status: "active" | "inactive" | "suspended", reason: string) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const action = status === "suspended" ? "suspend" : status === "active" ? "reinstate" : "pause"
        const outcome = yield* sql.withTransaction(
          Effect.gen(function* () {
            const [current] = yield* sql<{ status: string; statusSetBy: string }>`
              SELECT status, status_set_by FROM agents WHERE id = ${agentId} AND status <> 'pending'`
            if (current === undefined) return Option.none()
            // An owner's pause can be made the operator's (then only an operator lifts it).
            const refused = current.status === status && !(status === "inactive" && current.statusSetBy === "owner")
            const leavingSuspension = current.status === "suspended" && !refused
            const held = leavingSuspension ? yield* heldUnarmed(agentId) : []
            const previous = refused
              ? current.status
              : Option.match(yield* agents.setStatusIn(agentId, status, reason), { onNone: () => current.status, onSome: (c) => c.previous })
            yield* rearm(who, held, reason, at)
            const record = yield* log.record(who, {
              action,
              machine: "agent",
              actorId: agentId,
              reason,
              outcome: refused ? "refused" : "applied",
              from: previous,
              to: refused ? null : status,
              transitionId: null,
              details: leavingSuspension ? { releasesRearmed: held.length } : {},
              at
            })
            return Option.some({ record, refused, leavingSuspension })
          })
        ).pipe(Effect.orDie)
        if (Option.isNone(outcome)) return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
        yield* cache.invalidate(agentId)
        if (outcome.value.refused) return yield* notApplicable(outcome.value.record, `the agent is already ${status}`)
        // A release refused after the first pass (an execution that completed while the change committed) is armed now.
        if (outcome.value.leavingSuspension) {
          const late = yield* sql.withTransaction(Effect.flatMap(heldUnarmed(agentId), (ids) => Effect.as(rearm(who, ids, reason, at), ids.length))).pipe(Effect.orDie)
          if (late > 0) yield* Effect.logInfo(`agent ${agentId}: ${late} more releases re-armed after reinstatement`)
        }
        return outcome.value.record
      }).pipe(Effect.withSpan("Levers.setAgentStatus"))

    /**
     * The operator's decision on a suspended agent's frozen money: every escrow of it still held goes back to its payer
     * through the refund path (each execution's machine takes OPERATOR_REFUND: escrow → refunds payable, a refund queued
     * for the treasury worker), each recorded on its execution and once on the agent, in one transaction. Executions are
     * locked before the agent row (the order reinstatement takes), and the agent row is shared-locked so it cannot be
     * reinstated meanwhile. A second call finds nothing held: refused, nothing refunded twice.
     */
    const refundFrozen = (who: OperatorIdentity, agentId: AgentId, reason: string) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const outcome = yield* sql.withTransaction(
          Effect.gen(function* () {
            const held = yield* sql<{ id: string; price: string }>`
              SELECT e.id, e.price::text AS price FROM executions e
              WHERE e.agent_id = ${agentId} AND e.state = 'completed.held' ORDER BY e.id FOR UPDATE OF e`
            const [agent] = yield* sql<{ status: string }>`SELECT status FROM agents WHERE id = ${agentId} AND status <> 'pending' FOR SHARE`
            if (agent === undefined) return Option.none()
            const suspended = agent.status === "suspended"
            const refunded: Array<{ readonly id: string; readonly price: bigint }> = []
            if (suspended) {
              for (const execution of held) {
                const delivered = yield* host.deliver("execution", execution.id, { type: "OPERATOR_REFUND", at, by: who.name, reason })
                if (Option.isNone(delivered) || !delivered.value.changed) continue
                refunded.push({ id: execution.id, price: BigInt(execution.price) })
                yield* log.record(who, {
                  action: "refund_frozen",
                  machine: "execution",
                  actorId: execution.id,
                  reason,
                  outcome: "applied",
                  from: delivered.value.from,
                  to: delivered.value.state,
                  transitionId: yield* log.lastTransition("execution", execution.id),
                  details: { agentId, amount: execution.price },
                  at
                })
              }
            }
            const applied = refunded.length > 0
            const record = yield* log.record(who, {
              action: "refund_frozen",
              machine: "agent",
              actorId: agentId,
              reason,
              outcome: applied ? "applied" : "refused",
              from: agent.status,
              to: applied ? agent.status : null,
              transitionId: null,
              details: { refunded: refunded.length, amount: refunded.reduce((sum, e) => sum + e.price, 0n).toString() },
              at
            })
            return Option.some({
              action: record,
              refused: applied
                ? Option.none()
                : Option.some(notApplicable(record, suspended ? "the agent has no held escrow to refund" : `the agent is ${agent.status}: only a suspended agent's frozen money can be refunded`))
            })
          })
        ).pipe(Effect.orDie)
        if (Option.isNone(outcome)) return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
        return yield* answer(outcome.value)
      }).pipe(Effect.withSpan("Levers.refundFrozen"))

    const retrySettlement = (who: OperatorIdentity, paymentId: string, reason: string) =>
      pull(who, { kind: "settlement", id: paymentId, action: "retry_settlement", reason, event: (at) => ({ type: "RETRY_NOW", at, by: who.name, reason }) })

    const forceCircuit = (who: OperatorIdentity, agentId: AgentId, state: "open" | "closed", reason: string) =>
      pull(who, {
        kind: "circuit",
        id: agentId,
        action: state === "open" ? "force_circuit_open" : "force_circuit_closed",
        reason,
        event: (at) => (state === "open" ? { type: "FORCE_OPEN", at, by: who.name, reason } : { type: "FORCE_CLOSE", at, by: who.name, reason })
      }).pipe(Effect.tap(() => cache.invalidate(agentId)))

    /**
     * A refund waiting for its next try is sent on the refund worker's next pass. An execution's refund goes through its
     * machine (REFUND_RETRY); a chain's has no live machine (the chain ended), so its row's due time moves, recorded on the chain.
     */
    const retryRefund = (who: OperatorIdentity, refundId: string, reason: string) =>
      Effect.gen(function* () {
        const [refund] = yield* sql<{ executionId: string | null; chainId: string | null; status: string }>`
          SELECT execution_id, chain_id::text AS chain_id, status FROM refunds WHERE id = ${refundId}`.pipe(Effect.orDie)
        if (refund === undefined) return yield* new NotFound({ code: "REFUND_NOT_FOUND", message: `no refund ${refundId}` })
        const machine = refund.executionId !== null ? "execution" : "chain"
        const actorId = refund.executionId ?? refund.chainId ?? refundId
        if (refund.status !== "pending" || refund.executionId === null) {
          const at = yield* Clock.currentTimeMillis
          const pending = refund.status === "pending"
          const action = yield* sql.withTransaction(
            Effect.gen(function* () {
              const moved = pending ? yield* retryOneNowStatement(sql, refundId, at) : []
              return yield* log.record(who, {
                action: "retry_refund",
                machine,
                actorId,
                reason,
                outcome: moved.length > 0 ? "applied" : "refused",
                from: null,
                to: null,
                transitionId: null,
                details: { refundId, refundStatus: moved.length > 0 ? "pending" : refund.status },
                at
              })
            })
          ).pipe(Effect.orDie)
          if (action.outcome === "refused") {
            return yield* notApplicable(action, `the refund is ${refund.status}: only a pending refund (waiting for its next try) can be retried`, { refundStatus: refund.status })
          }
          return action
        }
        return yield* pull(who, { kind: "execution", id: actorId, action: "retry_refund", reason, event: (at) => ({ type: "REFUND_RETRY", at, by: who.name, reason }) })
      }).pipe(Effect.withSpan("Levers.retryRefund"))

    /** A dead-lettered delivery: a new delivery of the same event and body (the owner's requeue, without the owner). */
    const requeueDelivery = (who: OperatorIdentity, deliveryId: string, reason: string) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const outcome = yield* sql.withTransaction(
          Effect.gen(function* () {
            const [row] = yield* sql<{ status: string; dlqId: string | null; requeuedAt: Date | null }>`
              SELECT d.status, q.id AS dlq_id, q.requeued_at FROM webhook_deliveries d
              LEFT JOIN webhook_dead_letters q ON q.delivery_id = d.id WHERE d.id = ${deliveryId} FOR UPDATE OF d`
            if (row === undefined) return Option.none()
            const requeued = row.dlqId !== null && row.requeuedAt === null ? Option.some(yield* deliveries.requeueEntry(row.dlqId, undefined)) : Option.none()
            const action = yield* log.record(who, {
              action: "requeue_delivery",
              machine: "webhookDelivery",
              actorId: deliveryId,
              reason,
              outcome: Option.isSome(requeued) ? "applied" : "refused",
              from: row.status,
              to: null,
              transitionId: null,
              details: Option.match(requeued, {
                onNone: () => ({ ...(row.requeuedAt === null ? {} : { requeuedAt: row.requeuedAt.toISOString() }) }),
                onSome: (r) => ({ newDeliveryId: r.newDeliveryId, deadLetterId: r.originalDlqId })
              }),
              at
            })
            return Option.some({
              action,
              refused: Option.isSome(requeued)
                ? Option.none()
                : Option.some(notApplicable(action, row.dlqId === null ? `the delivery is ${row.status}, not dead-lettered` : "the dead-letter entry was already requeued"))
            })
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        if (Option.isNone(outcome)) return yield* new NotFound({ code: "ACTOR_NOT_FOUND", message: `no webhookDelivery ${deliveryId}` })
        return yield* answer(outcome.value)
      }).pipe(Effect.withSpan("Levers.requeueDelivery"))

    return { setAgentStatus, refundFrozen, retrySettlement, retryRefund, requeueDelivery, forceCircuit } as const
  }),
  dependencies: [OperatorLog.Default, DeliveryLog.Default, AgentCache.Default, MachineHost.Default, Agents.Default]
}) {}
