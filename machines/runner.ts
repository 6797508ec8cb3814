// How one kind of persisted machine is run: a feature's `MachineSpec` (lock, snapshot, actions, save) closed over its
// types into a `Runner` that locks the actor's row, steps its machine, runs the named actions and saves the snapshot,
// the transition history and the durable timers in the caller's transaction (batched in a unit of work).
import type { SqlClient, SqlError, Statement } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { AnyStateMachine, EventFromLogic } from "xstate"
import type { Deliver, Delivered, MachineKind } from "./Host.js"
import { type ActionOf, type ParamsOf, type PersistedSnapshot, type Step, stepMachine } from "./step.js"
import * as UnitOfWork from "../services/sql/UnitOfWork.js"
import { withSpan } from "../layers/observability/span.js"

/** What an action handler sees: its actor, the event, and the host's services for effects that belong to the step. */
export interface ActionContext<M extends AnyStateMachine, Row> {
  readonly id: string
  /** The row as locked, before this step. */
  readonly row: Row
  readonly event: EventFromLogic<M>
  readonly step: Step<M>
  /** Another machine's event, in this same transaction. */
  readonly deliver: Deliver
  /** Arms (or moves) the durable timer that sends `event` to this actor at `event.at`. */
  readonly schedule: (event: { readonly type: string; readonly at: number }) => Effect.Effect<void, SqlError.SqlError>
  readonly cancel: (eventType: string) => Effect.Effect<void, SqlError.SqlError>
  /** Runs after the snapshot is saved (for row locks other actors contend on: taken last, held shortest). */
  readonly later: (effect: Effect.Effect<void, SqlError.SqlError>) => void
}

type HostActionName<M extends AnyStateMachine, P extends string> = Exclude<ActionOf<M>["type"], P>

/** An action handler; declared as a method so the host can hold every kind's handlers in one map (parameter bivariance). */
type Handler<Params, Ctx> = {
  bivarianceHack(params: Params, ctx: Ctx): Effect.Effect<void, SqlError.SqlError>
}["bivarianceHack"]

/** How the host runs one kind of machine. `pure` lists the machine's assign-only actions (they never reach the host). */
export interface MachineSpec<M extends AnyStateMachine, Row, P extends ActionOf<M>["type"] = never> {
  readonly machine: M
  readonly pure: ReadonlyArray<P>
  /** Locks the actor's row (SELECT … FOR UPDATE) in the caller's transaction. */
  readonly lock: (id: string) => Effect.Effect<Option.Option<Row>, SqlError.SqlError>
  /**
   * Locks several actors' rows in one statement, in a global order (SELECT … ORDER BY id FOR UPDATE), in the caller's
   * transaction: what `MachineHost.lockAll` needs for this kind.
   */
  readonly lockAll?: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, Row>, SqlError.SqlError>
  /**
   * The row's SELECT (with FOR UPDATE when `lock`: what `lock` runs) and its decoding: with it, a step in an optimistic
   * unit of work (services/sql/UnitOfWork.ts `optimistic`) reads the row without a lock and its write checks that the
   * locking SELECT still returns that very row. Without it, such a unit falls back to its locking path.
   */
  readonly guarded?: {
    readonly select: (id: string, lock: boolean) => Statement.Fragment
    readonly decode: (rows: ReadonlyArray<unknown>) => Effect.Effect<Option.Option<Row>>
  }
  readonly snapshot: (row: Row) => PersistedSnapshot
  readonly actions: {
    readonly [N in HostActionName<M, P>]: Handler<ParamsOf<M, N>, ActionContext<M, Row>>
  }
  /** Writes the new snapshot and the columns the step changes. */
  readonly save: (id: string, row: Row, step: Step<M>, event: EventFromLogic<M>) => Effect.Effect<void, SqlError.SqlError>
  /**
   * The row as a step leaves it. With it, a second event to the same actor in the same unit-of-work transaction
   * (services/sql/UnitOfWork.ts) steps from this row instead of locking and reading it again.
   */
  readonly next?: (row: Row, step: Step<M>, event: EventFromLogic<M>) => Row
  /** Decodes a stored timer event (none when it is not one of this machine's timer events). */
  readonly timerEvent: (stored: unknown) => Option.Option<EventFromLogic<M>>
  /** What the history keeps of an event (large payloads such as outputs stay on the row). */
  readonly historyEvent?: (event: EventFromLogic<M>) => { readonly type: string }
}

/** A spec with its types closed over: what the host calls. */
export interface Runner<E> {
  readonly deliver: (id: string, event: E, deliver: Deliver) => Effect.Effect<Option.Option<Delivered>, SqlError.SqlError>
  readonly deliverStored: (id: string, stored: unknown, deliver: Deliver) => Effect.Effect<Option.Option<Delivered>, SqlError.SqlError>
  /** Locks the rows of `ids` in the caller's unit of work, where their next events step from them (the ids found). */
  readonly lockAll: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
}

/** One transition's history row. */
export interface HistoryEntry {
  readonly machine: MachineKind
  readonly actorId: string
  readonly event: { readonly type: string }
  readonly from: string | null
  readonly to: string
  readonly at: number
}

/** The `machine_transitions` rows of some transitions (shared by the host and batched creation). */
export const historyRows = (entries: ReadonlyArray<HistoryEntry>) =>
  entries.map((e) => ({
    machine: e.machine,
    actorId: e.actorId,
    eventType: e.event.type,
    event: JSON.stringify(e.event),
    fromState: e.from,
    toState: e.to,
    at: new Date(e.at)
  }))

/** The history rows of some transitions as one statement. */
export const historyStatement = (sql: SqlClient.SqlClient, entries: ReadonlyArray<HistoryEntry>) =>
  sql`INSERT INTO machine_transitions ${sql.insert(historyRows(entries))}`

export const scheduleStatement = (
  sql: SqlClient.SqlClient,
  machine: MachineKind,
  actorId: string,
  event: { readonly type: string; readonly at: number }
) =>
  sql`INSERT INTO machine_timers ${sql.insert({
    machine,
    actorId,
    eventType: event.type,
    event: JSON.stringify(event),
    dueAt: new Date(event.at)
  })}
    ON CONFLICT (machine, actor_id, event_type) WHERE fired_at IS NULL
    DO UPDATE SET due_at = EXCLUDED.due_at, event = EXCLUDED.event`

const cancelStatement = (sql: SqlClient.SqlClient, machine: MachineKind, actorId: string, eventType: string) =>
  sql`DELETE FROM machine_timers WHERE machine = ${machine} AND actor_id = ${actorId} AND event_type = ${eventType} AND fired_at IS NULL`

/** Timer and history writes of a step: batched in a unit-of-work transaction, run at once otherwise. */
const timerKey = (machine: MachineKind, actorId: string, eventType: string) => `${machine}\u0000${actorId}\u0000${eventType}`

/** Closes a spec over its types: lock → step → actions → save → history (→ later effects). */
export const runner = <M extends AnyStateMachine, Row, P extends ActionOf<M>["type"]>(
  sql: SqlClient.SqlClient,
  kind: MachineKind,
  spec: MachineSpec<M, Row, P>
): Runner<EventFromLogic<M>> => {
  const handlers: Partial<Record<string, Handler<unknown, ActionContext<M, Row>>>> = spec.actions
  const pure = new Set<string>(spec.pure)
  /** Rows this kind's steps left, per open unit-of-work transaction (locked by the first step there). */
  const stepped = new WeakMap<UnitOfWork.Unit, Map<string, Row>>()
  /** The actor's row under its lock, or in an optimistic unit read under a guard. */
  const lockRow = (id: string, unit: UnitOfWork.Unit | undefined) => {
    const guarded = spec.guarded
    if (unit === undefined || !unit.optimistic || guarded === undefined) return spec.lock(id)
    return Effect.flatMap(UnitOfWork.guardedRead(sql, (lock) => guarded.select(id, lock)), guarded.decode)
  }
  const deliver = (id: string, event: EventFromLogic<M>, deliverAny: Deliver) =>
    Effect.gen(function* () {
      const unit = Option.getOrUndefined(yield* UnitOfWork.current)
      const known = unit === undefined ? undefined : stepped.get(unit)?.get(id)
      const found = known !== undefined ? Option.some(known) : yield* lockRow(id, unit)
      if (Option.isNone(found)) return Option.none<Delivered>()
      const row = found.value
      const step = stepMachine(spec.machine, spec.snapshot(row), event)
      if (!step.changed) return Option.some<Delivered>({ from: step.from, state: step.state, changed: false })
      const later: Array<Effect.Effect<void, SqlError.SqlError>> = []
      const ctx: ActionContext<M, Row> = {
        id,
        row,
        event,
        step,
        deliver: deliverAny,
        schedule: (timer) => UnitOfWork.keyed(sql, "machine_timers", timerKey(kind, id, timer.type), scheduleStatement(sql, kind, id, timer)),
        cancel: (eventType) => UnitOfWork.keyed(sql, "machine_timers", timerKey(kind, id, eventType), cancelStatement(sql, kind, id, eventType)),
        later: (effect) => void later.push(effect)
      }
      for (const action of step.actions) {
        const handler = handlers[action.type]
        if (handler !== undefined) yield* handler(action.params, ctx)
        else if (!pure.has(action.type)) return yield* Effect.dieMessage(`${kind} machine: no handler for action ${action.type}`)
      }
      yield* spec.save(id, row, step, event)
      if (unit !== undefined && spec.next !== undefined) {
        const rows = stepped.get(unit) ?? new Map<string, Row>()
        rows.set(id, spec.next(row, step, event))
        stepped.set(unit, rows)
      } else if (unit !== undefined) {
        // A row `lockAll` left is stale once stepped: a later event locks and reads it again.
        stepped.get(unit)?.delete(id)
      }
      const at = "at" in event && typeof event.at === "number" ? event.at : yield* Clock.currentTimeMillis
      yield* UnitOfWork.insert(sql, "machine_transitions", historyRows([{
        machine: kind,
        actorId: id,
        event: spec.historyEvent === undefined ? event : spec.historyEvent(event),
        from: step.from,
        to: step.state,
        at
      }]))
      if (later.length > 0) yield* Effect.all(later, { discard: true })
      return Option.some<Delivered>({ from: step.from, state: step.state, changed: true })
    }).pipe(withSpan("MachineHost.deliver", { attributes: { kind, event: event.type } }))
  const lockAll = (ids: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const unit = Option.getOrUndefined(yield* UnitOfWork.current)
      if (spec.lockAll === undefined || unit === undefined) {
        return yield* Effect.dieMessage(`${kind} machine: lockAll needs the spec's lockAll and a unit-of-work transaction`)
      }
      const locked = yield* spec.lockAll(ids)
      const rows = stepped.get(unit) ?? new Map<string, Row>()
      // A row this unit already stepped is newer than the one just read.
      for (const [id, row] of locked) if (!rows.has(id)) rows.set(id, row)
      stepped.set(unit, rows)
      return [...locked.keys()]
    })
  return {
    deliver,
    lockAll,
    deliverStored: (id, stored, deliverAny) =>
      Option.match(spec.timerEvent(stored), {
        onNone: () => Effect.as(Effect.logWarning(`${kind} ${id}: stored timer event not understood`), Option.none<Delivered>()),
        onSome: (event) => deliver(id, event, deliverAny)
      })
  }
}
