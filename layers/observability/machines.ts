// Counts the transitions every persisted machine saves (and the executions' API statuses) by wrapping the host's runners,
// and logs those that are background actions or failures (machineLog.ts).
import { Context, Effect, Layer, Option } from "effect"
import { type Delivered, type MachineKind, MachineRunners, type Runners } from "../../machines/Host.js"
import { type Runner } from "../../machines/runner.js"
import { logTransition } from "./machineLog.js"
import { executionsReached, machineTransitions } from "./Metrics.js"

/** The API status an execution reached with this transition, if it changed (spec section 3; see machines/execution.ts). */
export const reachedStatus = (from: string | null, to: string): string | undefined => {
  if (to.startsWith("completed")) return from !== null && from.startsWith("completed") ? undefined : "completed"
  if (to === "failed" || to === "timeout" || to === "refunded") return from === to ? undefined : to
  // running is pending again (a retry); refunding, returned and cancelled keep the failure's status.
  return undefined
}

const count = (kind: MachineKind, delivered: Option.Option<Delivered>) => {
  if (Option.isNone(delivered) || !delivered.value.changed) return
  const { from, state } = delivered.value
  machineTransitions.inc({ machine: kind, state })
  if (kind !== "execution") return
  const status = reachedStatus(from, state)
  if (status !== undefined) executionsReached.inc({ status })
}

/**
 * Counted when the step is saved, inside the caller's transaction: a transaction that rolls back afterwards leaves a
 * count (and a log line) for a transition that did not happen (rare: the step is the transaction's last statements).
 */
const instrument = <E>(kind: MachineKind, runner: Runner<E>): Runner<E> => {
  const observe = (id: string, event: unknown) => (d: Option.Option<Delivered>) =>
    Effect.suspend(() => {
      count(kind, d)
      return logTransition(kind, id, event, d)
    })
  return {
    deliver: (id, event, deliver) => Effect.tap(runner.deliver(id, event, deliver), observe(id, event)),
    deliverStored: (id, stored, deliver) => Effect.tap(runner.deliverStored(id, stored, deliver), observe(id, stored)),
    lockAll: runner.lockAll
  }
}

const instrumentAll = (runners: Runners): Runners => ({
  execution: instrument("execution", runners.execution),
  settlement: instrument("settlement", runners.settlement),
  circuit: instrument("circuit", runners.circuit),
  treasury: instrument("treasury", runners.treasury),
  withdrawal: instrument("withdrawal", runners.withdrawal),
  dispute: instrument("dispute", runners.dispute),
  webhookDelivery: instrument("webhookDelivery", runners.webhookDelivery),
  chain: instrument("chain", runners.chain),
  channel: instrument("channel", runners.channel)
})

/** The same registry, its runners counted. */
export const withTransitionMetrics = <E, R>(runners: Layer.Layer<MachineRunners, E, R>) =>
  Layer.map(runners, (context) => Context.add(context, MachineRunners, instrumentAll(Context.get(context, MachineRunners))))
