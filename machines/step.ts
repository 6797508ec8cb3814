// Pure steps of a persisted machine: restore a stored snapshot, apply one event, and return the next snapshot with the
// actions the host must run (typed from the machine's `setup`).
import {
  type AnyActorScope,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  createActor,
  type EventFromLogic,
  type InputFrom,
  type StateMachine,
  type StateValue
} from "xstate"

/** What we store of a snapshot: its state value and context (deadlines live in the context as data). */
export interface PersistedSnapshot {
  readonly value: StateValue
  readonly context: unknown
}

/** The parameterized actions a machine's `setup` declares: `{ type, params }`. */
export type ActionOf<M> = M extends StateMachine<
  infer _C,
  infer _E,
  infer _Ch,
  infer _Ac,
  infer A,
  infer _G,
  infer _D,
  infer _S,
  infer _T,
  infer _I,
  infer _O,
  infer _Em,
  infer _Me,
  infer _Sc
> ? A
  : never

/** The params of action `N` of machine `M`. */
export type ParamsOf<M, N extends string> = Extract<ActionOf<M>, { readonly type: N }>["params"]

export interface Step<M extends AnyStateMachine = AnyStateMachine> {
  readonly snapshot: AnyMachineSnapshot
  readonly persisted: PersistedSnapshot
  /** "completed.held" for nested states. */
  readonly state: string
  readonly from: string | null
  readonly actions: ReadonlyArray<ActionOf<M>>
  /** False when the event was not accepted in this state (nothing to persist). */
  readonly changed: boolean
}

export const stateString = (value: StateValue): string =>
  typeof value === "string"
    ? value
    : Object.entries(value)
      .map(([key, child]) => (child === undefined ? key : `${key}.${stateString(child)}`))
      .join(",")

/**
 * XState's `transition` erases action types; an action is the machine's own when its `setup` declares it. (Inline
 * actions and built-ins such as `assign` are resolved inside the transition and never reach the host.)
 */
const isActionOf = <M extends AnyStateMachine>(
  machine: M,
  action: { readonly type: string; readonly params?: unknown }
): action is ActionOf<M> => Object.hasOwn(machine.implementations.actions, action.type)

const toStep = <M extends AnyStateMachine>(
  machine: M,
  snapshot: AnyMachineSnapshot,
  actions: ReadonlyArray<{ readonly type: string; readonly params?: unknown }>,
  from: string | null,
  changed: boolean
): Step<M> => {
  const value: StateValue = snapshot.value
  return {
    snapshot,
    persisted: { value, context: snapshot.context },
    state: stateString(value),
    from,
    actions: actions.map((a) => ({ type: a.type, params: a.params })).filter((a) => isActionOf(machine, a)),
    changed
  }
}

type ExecutableAction = { readonly type: string; readonly params?: unknown }

/**
 * What XState's pure `transition` / `initialTransition` do, without their cost per call: they build an inert actor
 * scope each time (`createActor`, which computes an initial snapshot, and a fresh actor system), ~0.3 ms a step. Our
 * machines spawn, invoke and send nothing (their actions are the host's, collected here), so one inert scope per
 * machine serves every step; only the collector of the step's actions is new. Steps are synchronous: no two share it.
 */
const scopes = new WeakMap<AnyStateMachine, AnyActorScope>()
const inertScope = (machine: AnyStateMachine): AnyActorScope => {
  const known = scopes.get(machine)
  if (known !== undefined) return known
  const self = createActor(machine)
  const scope: AnyActorScope = {
    self,
    defer: () => {},
    id: "",
    logger: () => {},
    sessionId: "",
    stopChild: () => {},
    system: self.system,
    emit: () => {},
    actionExecutor: () => {}
  }
  scopes.set(machine, scope)
  return scope
}

const collecting = <S>(machine: AnyStateMachine, run: (scope: AnyActorScope) => S): [S, ReadonlyArray<ExecutableAction>] => {
  const actions: Array<ExecutableAction> = []
  const scope: AnyActorScope = { ...inertScope(machine), actionExecutor: (action) => void actions.push(action) }
  return [run(scope), actions]
}

/** The first snapshot of a new actor, with its entry actions. */
export const startMachine = <M extends AnyStateMachine>(machine: M, input: InputFrom<M>): Step<M> => {
  const logic: AnyStateMachine = machine
  const [snapshot, actions] = collecting(logic, (scope): AnyMachineSnapshot => logic.getInitialSnapshot(scope, input))
  return toStep(machine, snapshot, actions, null, true)
}

export const isPersistedSnapshot = (value: unknown): value is PersistedSnapshot =>
  typeof value === "object" && value !== null && "value" in value && "context" in value

/** Restores a stored snapshot. The context was written by this machine's own assigns (see the column it came from). */
export const restore = (machine: AnyStateMachine, persisted: PersistedSnapshot): AnyMachineSnapshot =>
  machine.resolveState({ value: persisted.value, context: persisted.context })

/** Pure: the next snapshot and the actions to run. An event the state does not accept changes nothing. */
export const stepMachine = <M extends AnyStateMachine>(machine: M, persisted: PersistedSnapshot, event: EventFromLogic<M>): Step<M> => {
  const logic: AnyStateMachine = machine
  const current = restore(logic, persisted)
  const from = stateString(current.value)
  if (!current.can(event)) return toStep(machine, current, [], from, false)
  const [next, actions] = collecting(logic, (scope): AnyMachineSnapshot => logic.transition(current, event, scope))
  return toStep(machine, next, actions, from, true)
}

/** The params of every `type` action of a step, in order (tests and batched creation). */
export const actionsOf = <M extends AnyStateMachine, N extends ActionOf<M>["type"]>(
  step: { readonly actions: ReadonlyArray<ActionOf<M>> },
  type: N
): Array<ParamsOf<M, N>> =>
  step.actions.filter((a): a is Extract<ActionOf<M>, { readonly type: N }> => a.type === type).map((a) => a.params)
