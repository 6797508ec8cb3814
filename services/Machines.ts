// Hosting persisted XState machines: pure steps from a stored snapshot, transition history, and durable timers.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Schedule, Schema } from "effect"
import {
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type EventFromLogic,
  initialTransition,
  type InputFrom,
  type StateValue,
  transition
} from "xstate"

/** What we store of a snapshot: its state value and context (deadlines live in the context as data). */
export interface PersistedSnapshot {
  readonly value: StateValue
  readonly context: unknown
}

export interface MachineAction {
  readonly type: string
  readonly params: unknown
}

export interface Step {
  readonly snapshot: AnyMachineSnapshot
  readonly persisted: PersistedSnapshot
  /** "completed.held" for nested states. */
  readonly state: string
  readonly from: string | null
  readonly actions: ReadonlyArray<MachineAction>
  /** False when the event was not accepted in this state (nothing to persist). */
  readonly changed: boolean
}

export const stateString = (value: StateValue): string =>
  typeof value === "string"
    ? value
    : Object.entries(value)
      .map(([key, child]) => (child === undefined ? key : `${key}.${stateString(child)}`))
      .join(",")

const toStep = (
  snapshot: AnyMachineSnapshot,
  actions: ReadonlyArray<{ readonly type: string; readonly params?: unknown }>,
  from: string | null,
  changed: boolean
): Step => {
  const value: StateValue = snapshot.value
  return {
    snapshot,
    persisted: { value, context: snapshot.context },
    state: stateString(value),
    from,
    actions: actions.map((a) => ({ type: a.type, params: a.params })),
    changed
  }
}

/** The first snapshot of a new actor, with its entry actions. */
export const startMachine = <M extends AnyStateMachine>(machine: M, input: InputFrom<M>): Step => {
  const [snapshot, actions] = initialTransition(machine, input)
  return toStep(snapshot, actions, null, true)
}

/** Restores a stored snapshot. The context was written by this machine's own assigns (see the column it came from). */
export const restore = (machine: AnyStateMachine, persisted: PersistedSnapshot): AnyMachineSnapshot =>
  machine.resolveState({ value: persisted.value, context: persisted.context })

/** Pure: the next snapshot and the actions to run. An event the state does not accept changes nothing. */
export const stepMachine = <M extends AnyStateMachine>(machine: M, persisted: PersistedSnapshot, event: EventFromLogic<M>): Step => {
  const logic: AnyStateMachine = machine
  const current = restore(logic, persisted)
  const from = stateString(current.value)
  if (!current.can(event)) return toStep(current, [], from, false)
  const [next, actions] = transition(logic, current, event)
  return toStep(next, actions, from, true)
}

export const actionsOf = <P>(step: { readonly actions: ReadonlyArray<MachineAction> }, type: string): Array<P> =>
  step.actions.filter((a) => a.type === type).map((a) => a.params as P)

/** One transition for the history. */
export interface Transition {
  readonly machine: string
  readonly actorId: string
  readonly event: { readonly type: string }
  readonly from: string | null
  readonly to: string
  readonly at: number
}

export interface TimerRow {
  readonly id: string
  readonly machine: string
  readonly actorId: string
  readonly eventType: string
  readonly event: unknown
}

const TimerRowSchema = Schema.Struct({
  id: Schema.String,
  machine: Schema.String,
  actorId: Schema.String,
  eventType: Schema.String,
  event: Schema.Unknown
})

/** Delivers a due timer's event; must mark it fired (`markFired`) inside the transaction that applies the event. */
export type TimerHandler = (timer: TimerRow, markFired: Effect.Effect<void, SqlError.SqlError>) => Effect.Effect<void, unknown>

/** How long a claimed timer is leased before another worker may take it. */
const TIMER_LEASE_MS = 30_000

export class Machines extends Effect.Service<Machines>()("Machines", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const handlers = new Map<string, TimerHandler>()

    /** The history rows of some transitions, as one statement (for callers that batch writes). */
    const recordStatement = (entries: ReadonlyArray<Transition>) =>
      sql`INSERT INTO machine_transitions ${sql.insert(entries.map((e) => ({
        machine: e.machine,
        actorId: e.actorId,
        eventType: e.event.type,
        event: JSON.stringify(e.event),
        fromState: e.from,
        toState: e.to,
        at: new Date(e.at)
      })))}`

    /** Appends transitions to the history (one statement for all of them). */
    const record = (
      machine: string,
      actorId: string,
      entries: ReadonlyArray<{ readonly event: { readonly type: string }; readonly from: string | null; readonly to: string; readonly at: number }>
    ) => (entries.length === 0 ? Effect.void : Effect.asVoid(recordStatement(entries.map((e) => ({ ...e, machine, actorId })))))

    /** Arms (or moves) the durable timer that sends `event` to the actor at `at`. */
    const scheduleStatement = (machine: string, actorId: string, event: { readonly type: string; readonly at?: number }, at: number) =>
      sql`INSERT INTO machine_timers ${sql.insert({
        machine,
        actorId,
        eventType: event.type,
        event: JSON.stringify(event),
        dueAt: new Date(at)
      })}
        ON CONFLICT (machine, actor_id, event_type) WHERE fired_at IS NULL
        DO UPDATE SET due_at = EXCLUDED.due_at, event = EXCLUDED.event`

    const schedule = (machine: string, actorId: string, event: { readonly type: string; readonly at?: number }, at: number) =>
      Effect.asVoid(scheduleStatement(machine, actorId, event, at))

    /** Drops the actor's pending timer for `eventType`, if any. */
    const cancel = (machine: string, actorId: string, eventType: string) =>
      Effect.asVoid(sql`DELETE FROM machine_timers WHERE machine = ${machine} AND actor_id = ${actorId} AND event_type = ${eventType} AND fired_at IS NULL`)

    const registerTimerHandler = (machine: string, handler: TimerHandler) => Effect.sync(() => void handlers.set(machine, handler))

    /** One pass: claims due timers (lease), hands each to its machine's handler. Returns how many were due. */
    const fireDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql`
        UPDATE machine_timers SET due_at = ${new Date(now + TIMER_LEASE_MS)}, attempts = attempts + 1
        WHERE id IN (
          SELECT id FROM machine_timers WHERE fired_at IS NULL AND due_at <= ${new Date(now)}
          ORDER BY due_at LIMIT 100 FOR UPDATE SKIP LOCKED)
        RETURNING id::text, machine, actor_id, event_type, event`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(TimerRowSchema))),
        Effect.orDie
      )
      yield* Effect.forEach(
        due,
        (timer) => {
          const handler = handlers.get(timer.machine)
          const markFired = sql`UPDATE machine_timers SET fired_at = ${new Date(now)} WHERE id = ${timer.id}`.pipe(Effect.asVoid)
          if (handler === undefined) return Effect.logWarning(`no handler for ${timer.machine} timers`)
          return handler(timer, markFired).pipe(
            Effect.catchAllCause((cause) => Effect.logError(`timer ${timer.id} (${timer.machine} ${timer.eventType}) failed; retried after its lease`, cause))
          )
        },
        { concurrency: 8, discard: true }
      )
      return due.length
    }).pipe(Effect.withSpan("Machines.fireDue"))

    return { record, recordStatement, schedule, scheduleStatement, cancel, registerTimerHandler, fireDue } as const
  })
}) {}

/** The durable timer worker: fires due timers every `interval` (Effect clock, so TestClock drives it in tests). */
export const TimersWorkerLive = (interval: Duration.DurationInput = Duration.seconds(1)) =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const machines = yield* Machines
      yield* machines.fireDue.pipe(
        Effect.catchAllCause((cause) => Effect.logError("timer pass failed", cause)),
        Effect.repeat(Schedule.spaced(interval)),
        Effect.forkScoped
      )
    })
  )
