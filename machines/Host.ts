// The one host for every persisted machine: lock the actor's row, step its machine, run the named actions, save the
// snapshot, the transition history and the durable timers, all in the caller's transaction. Feature modules describe
// their machine with a `MachineSpec` (machines/runner.ts); the composition root lists one per kind (a missing kind is a type error).
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Context, Duration, Effect, Layer, type Option, Schedule, Schema } from "effect"
import type { ChainEvent } from "./chain.js"
import type { ChannelEvent } from "./channel.js"
import type { CircuitEvent } from "./circuit.js"
import type { DisputeEvent } from "./dispute.js"
import type { ExecutionEvent } from "./execution.js"
import type { SettlementEvent } from "./settlement.js"
import type { Runner } from "./runner.js"
import type { TreasuryTxEvent } from "./treasuryTx.js"
import type { DeliveryEvent } from "./webhookDelivery.js"
import type { WithdrawalEvent } from "./withdrawal.js"
import { withSpan } from "../layers/observability/span.js"

/** Every persisted machine kind and the events it takes. */
export interface MachineEvents {
  readonly execution: ExecutionEvent
  readonly settlement: SettlementEvent
  readonly circuit: CircuitEvent
  readonly treasury: TreasuryTxEvent
  readonly withdrawal: WithdrawalEvent
  readonly dispute: DisputeEvent
  readonly webhookDelivery: DeliveryEvent
  readonly chain: ChainEvent
  readonly channel: ChannelEvent
}
export type MachineKind = keyof MachineEvents
const KINDS: ReadonlyArray<MachineKind> = ["execution", "settlement", "circuit", "treasury", "withdrawal", "dispute", "webhookDelivery", "chain", "channel"]
const isMachineKind = (value: string): value is MachineKind => KINDS.some((k) => k === value)

/** What a delivery did (none when the actor does not exist). */
export interface Delivered {
  readonly from: string | null
  readonly state: string
  /** False when the state did not accept the event: nothing was saved or run. */
  readonly changed: boolean
}

export type Deliver = <K extends MachineKind>(
  kind: K,
  id: string,
  event: MachineEvents[K]
) => Effect.Effect<Option.Option<Delivered>, SqlError.SqlError>

export type Runners = { readonly [K in MachineKind]: Runner<MachineEvents[K]> }

/** The runners of every kind, built at the composition root. */
export class MachineRunners extends Context.Tag("machines/MachineRunners")<MachineRunners, Runners>() {}

const TimerRow = Schema.Struct({ id: Schema.String, machine: Schema.String, actorId: Schema.String, event: Schema.Unknown })

/** How long a claimed timer is leased before another worker may take it. */
const TIMER_LEASE_MS = 30_000

export class MachineHost extends Effect.Service<MachineHost>()("machines/MachineHost", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const runners = yield* MachineRunners

    /** Applies one event to an actor inside the caller's transaction. */
    const deliver: Deliver = (kind, id, event) => runners[kind].deliver(id, event, deliver)

    /** One event in its own transaction. */
    const deliverNow: Deliver = (kind, id, event) => sql.withTransaction(deliver(kind, id, event))

    /**
     * Locks several actors of one kind in one statement inside the caller's unit-of-work transaction
     * (services/sql/UnitOfWork.ts); the next event to each of them there steps from the row so locked instead of locking
     * it again. The ids found. For kinds whose spec has `lockAll` (a defect otherwise, or outside a unit).
     */
    const lockAll = (kind: MachineKind, ids: ReadonlyArray<string>) => runners[kind].lockAll(ids)

    /** One pass: claims due timers (lease), delivers each in its own transaction with the timer marked fired. */
    const fireDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql`
        UPDATE machine_timers SET due_at = ${new Date(now + TIMER_LEASE_MS)}, attempts = attempts + 1
        WHERE id IN (
          SELECT id FROM machine_timers WHERE fired_at IS NULL AND due_at <= ${new Date(now)}
          ORDER BY due_at LIMIT 100 FOR UPDATE SKIP LOCKED)
        RETURNING id::text, machine, actor_id, event`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(TimerRow))),
        Effect.orDie
      )
      yield* Effect.forEach(
        due,
        (timer) => {
          const kind = timer.machine
          if (!isMachineKind(kind)) return Effect.logWarning(`timer ${timer.id}: unknown machine ${kind}`)
          return sql.withTransaction(
            Effect.zipRight(
              sql`UPDATE machine_timers SET fired_at = ${new Date(now)} WHERE id = ${timer.id}`,
              runners[kind].deliverStored(timer.actorId, timer.event, deliver)
            )
          ).pipe(Effect.catchAllCause((cause) => Effect.logError(`timer ${timer.id} (${kind}) failed; retried after its lease`, cause)))
        },
        { concurrency: 8, discard: true }
      )
      return due.length
    }).pipe(withSpan("MachineHost.fireDue"))

    return { deliver, deliverNow, lockAll, fireDue } as const
  })
}) {}

/** The durable timer worker: fires due timers every `interval` (Effect clock, so TestClock drives it in tests). */
export const TimersWorkerLive = (interval: Duration.DurationInput = Duration.seconds(1)) =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const host = yield* MachineHost
      yield* host.fireDue.pipe(
        Effect.catchAllCause((cause) => Effect.logError("timer pass failed", cause)),
        Effect.repeat(Schedule.spaced(interval)),
        Effect.forkScoped
      )
    })
  )
