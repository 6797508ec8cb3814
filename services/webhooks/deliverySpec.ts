// How the host runs a delivery's machine: a subscription's failure count (disabled after 10 in a row; a callback has no
// subscription to count or disable), the dead-letter entry, and the retry time saved with the snapshot (the sender's
// lease column is the machine's timer).
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot, startMachine } from "../../machines/step.js"
import { deliveryMachine } from "../../machines/webhookDelivery.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { newId } from "../../src/domain/Ids.js"
import { type DeliveryRow, DeliveriesRepo } from "./DeliveriesRepo.js"

/** How stale a subscription's `last_success` may be (a success within this much of the recorded one does not rewrite it). */
export const LAST_SUCCESS_RESOLUTION_MS = 1_000

/** Consecutive failed attempts, across deliveries, after which a subscription is switched off. */
export const DISABLE_AFTER_FAILURES = 10

export type DeliverySpec = MachineSpec<typeof deliveryMachine, DeliveryRow, "countAttempt" | "planRetry">

/** A subscription's outcomes within one unit of work, in the order they were stepped. */
export interface Outcomes {
  /** Failures before the first success (they add to the stored streak). */
  readonly lead: number
  /** A success ends the stored streak. */
  readonly reset: boolean
  /** Failures after the last success (the new streak when there was one). */
  readonly tail: number
  /** The longest run of failures after the first success. */
  readonly peak: number
  readonly lastFailure: number | null
  readonly lastSuccess: number | null
}

export const noOutcomes: Outcomes = { lead: 0, reset: false, tail: 0, peak: 0, lastFailure: null, lastSuccess: null }

/** One more outcome of a subscription's attempt. */
export const addOutcome = (o: Outcomes, success: boolean, at: number): Outcomes =>
  success
    ? { ...o, reset: true, tail: 0, lastSuccess: Math.max(o.lastSuccess ?? at, at) }
    : o.reset
    ? { ...o, tail: o.tail + 1, peak: Math.max(o.peak, o.tail + 1), lastFailure: Math.max(o.lastFailure ?? at, at) }
    : { ...o, lead: o.lead + 1, lastFailure: Math.max(o.lastFailure ?? at, at) }

/** The key of a unit's one statement of subscription counters. */
const COUNTERS_KEY = "webhook_subscriptions\u0000counters"

export class DeliveryMachine extends Effect.Service<DeliveryMachine>()("webhooks/DeliveryMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* DeliveriesRepo
    /** The outcomes each open unit of work has counted, per subscription, since its counters statement was last sent. */
    const counted = new WeakMap<UnitOfWork.Unit, Map<string, Outcomes>>()

    /**
     * The subscriptions' counters after some outcomes, as one statement: consecutive failures (a success resets them;
     * switched off at the 10th), the last failure, the last success (only when it changes something: a failure streak
     * to reset, or a last success older than a second; every delivery of a busy webhook would otherwise queue on its
     * subscription's row lock: 70 ms per success measured under load, each wait holding a database connection). The rows
     * are locked in id order, so two processes recording groups that share subscriptions cannot deadlock.
     */
    const countersStatement = (outcomes: ReadonlyMap<string, Outcomes>) => {
      const values = [...outcomes].map(([id, o]) => ({
        id,
        lead: o.lead,
        reset: o.reset,
        tail: o.tail,
        peak: o.peak,
        failed: o.lead > 0 || o.peak > 0,
        last_failure: o.lastFailure === null ? null : new Date(o.lastFailure).toISOString(),
        last_success: o.lastSuccess === null ? null : new Date(o.lastSuccess).toISOString(),
        stale_before: o.lastSuccess === null ? null : new Date(o.lastSuccess - LAST_SUCCESS_RESOLUTION_MS).toISOString()
      }))
      return sql`UPDATE webhook_subscriptions s SET
          failure_count = CASE WHEN v.reset THEN v.tail ELSE s.failure_count + v.lead END,
          last_failure = COALESCE(v.last_failure, s.last_failure),
          last_success = COALESCE(v.last_success, s.last_success),
          is_active = s.is_active AND (v.lead = 0 OR s.failure_count + v.lead < ${DISABLE_AFTER_FAILURES}) AND v.peak < ${DISABLE_AFTER_FAILURES}
        FROM (SELECT c.* FROM jsonb_to_recordset(${JSON.stringify(values)}::jsonb)
                AS c(id text, lead int, reset boolean, tail int, peak int, failed boolean, last_failure timestamptz, last_success timestamptz, stale_before timestamptz)
              JOIN webhook_subscriptions w ON w.id = c.id
              WHERE c.failed OR w.failure_count <> 0 OR w.last_success IS NULL OR w.last_success < c.stale_before
              ORDER BY w.id FOR UPDATE OF w) v
        WHERE s.id = v.id`
    }

    /**
     * Counts one outcome: in a unit of work, into the unit's one counters statement (sent with its batch: the outcomes
     * of several deliveries recorded together, in the order they were stepped); outside one, at once.
     */
    const countOutcome = (subscriptionId: string, success: boolean, at: number) =>
      Effect.flatMap(UnitOfWork.current, (unit) => {
        if (Option.isNone(unit)) return countersStatement(new Map([[subscriptionId, addOutcome(noOutcomes, success, at)]])).pipe(Effect.asVoid)
        const u = unit.value
        // The unit's earlier counters were sent by a flush (their statement is no longer pending): start afresh.
        const outcomes = u.keyed.has(COUNTERS_KEY) ? counted.get(u) ?? new Map<string, Outcomes>() : new Map<string, Outcomes>()
        outcomes.set(subscriptionId, addOutcome(outcomes.get(subscriptionId) ?? noOutcomes, success, at))
        counted.set(u, outcomes)
        return UnitOfWork.keyed(sql, "webhook_subscriptions", COUNTERS_KEY, countersStatement(outcomes))
      })
    const spec: DeliverySpec = {
      machine: deliveryMachine,
      pure: ["countAttempt", "planRetry"],
      lock: repo.lock,
      lockAll: repo.lockAll,
      snapshot: (row) => (isPersistedSnapshot(row.machineSnapshot) ? row.machineSnapshot : startMachine(deliveryMachine, {}).persisted),
      actions: {
        countOutcome: ({ success }, { row, event }) => (row.subscriptionId === null ? Effect.void : countOutcome(row.subscriptionId, success, event.at)),
        deadLetter: (_, { row, event }) => {
          const dlqId = newId("dlq")
          const lastError = event.type === "ATTEMPT_FAILED" ? event.error.slice(0, 500) : null
          const lastStatus = event.type === "SUPERSEDED" ? null : event.status
          return Effect.zipRight(
            Effect.logError(`webhook delivery ${row.id} dead-lettered after ${row.attemptCount + 1} attempts: ${lastStatus ?? "no answer"} ${lastError ?? ""}`.trim(), {
              event: "webhookDelivery.dead",
              deliveryId: row.id,
              deadLetterId: dlqId,
              subscriptionId: row.subscriptionId,
              executionId: row.executionId,
              eventType: row.eventType,
              attempts: row.attemptCount + 1,
              lastStatus,
              cause: lastError
            }),
            UnitOfWork.insert(sql, "webhook_dead_letters", [{
            id: dlqId,
            deliveryId: row.id,
            subscriptionId: row.subscriptionId,
            eventType: row.eventType,
            lastAttemptAt: new Date(event.at),
            totalAttempts: row.attemptCount + 1,
            lastError
          }]))
        }
      },
      save: (id, _row, step, event) => {
        const context = step.snapshot.context
        return UnitOfWork.update(sql, "webhook_deliveries", id, {
          status: step.state === "delivered" || step.state === "dead" || step.state === "superseded" ? step.state : "pending",
          machineSnapshot: JSON.stringify(step.persisted),
          attemptCount: context.attempts,
          ...(event.type === "SUPERSEDED" ? {} : { responseStatus: event.status }),
          ...(step.state === "pending" && context.nextAttemptAt !== null ? { nextAttemptAt: new Date(context.nextAttemptAt) } : {}),
          ...(event.type === "DELIVERED" ? { deliveredAt: new Date(event.at) } : {})
        })
      },
      timerEvent: () => Option.none()
    }
    return { spec } as const
  }),
  dependencies: [DeliveriesRepo.Default]
}) {}
