// Each agent's circuit breaker: opossum's state changes and call outcomes drive the shared, persisted machine; an open
// circuit refuses calls before anything is charged.
import { Clock, Effect, Stream } from "effect"
import { AgentProxy, type BreakerChange } from "../../layers/AgentProxy.js"
import type { CircuitEvent, CircuitState } from "../../machines/circuit.js"
import { MachineHost } from "../../machines/Host.js"
import { isPersistedSnapshot } from "../../machines/step.js"
import type { AgentRecord } from "../../src/domain/Agent.js"
import { Unavailable } from "../../src/domain/Errors.js"
import { AgentCache } from "../agents/AgentCache.js"
import { CircuitMachine } from "./circuitSpec.js"

/** Stamped with the Effect clock when delivered (at once): the durable probe timer counts from it, TestClock included. */
const eventFor = (change: BreakerChange, at: number): CircuitEvent =>
  change.state === "open" ? { type: "TRIP", at } : change.state === "half-open" ? { type: "PROBE", at } : { type: "RESET", at }

/** When an open circuit accepts a trial call, from the stored snapshot. */
const retryAtOf = (snapshot: unknown): number | null => {
  if (!isPersistedSnapshot(snapshot)) return null
  const context = snapshot.context
  return typeof context === "object" && context !== null && "retryAt" in context && typeof context.retryAt === "number"
    ? context.retryAt
    : null
}

/** Held open by an operator (FORCE_OPEN): refused whatever its retry time says, until an operator closes it. */
const forcedOf = (snapshot: unknown): boolean =>
  isPersistedSnapshot(snapshot) && typeof snapshot.context === "object" && snapshot.context !== null &&
  "forced" in snapshot.context && snapshot.context.forced === true

export class Circuits extends Effect.Service<Circuits>()("circuits/Circuits", {
  scoped: Effect.gen(function* () {
    const host = yield* MachineHost
    const proxy = yield* AgentProxy
    const cache = yield* AgentCache
    const { resetTimeoutMs } = yield* CircuitMachine

    /** Applies one event to the agent's circuit machine (its own transaction); caches learn of a state change after commit. */
    const deliver = (agentId: string, event: CircuitEvent) =>
      Effect.gen(function* () {
        const delivered = yield* host.deliverNow("circuit", agentId, event)
        const changed = delivered._tag === "Some" && delivered.value.changed && delivered.value.from !== delivered.value.state
        if (changed) yield* cache.invalidate(agentId)
        return changed
      }).pipe(Effect.withSpan("Circuits.deliver"))

    // opossum's state changes in this process drive the shared, persisted machine.
    yield* Stream.fromPubSub(proxy.breakerChanges).pipe(
      Stream.runForEach((change) =>
        Clock.currentTimeMillis.pipe(Effect.flatMap((at) => deliver(change.agentId, eventFor(change, at))),
          Effect.catchAllCause((cause) => Effect.logError(`circuit event for ${change.agentId} failed`, cause))
        )),
      Effect.forkScoped
    )

    /** Fail fast (nothing charged) while the circuit is open: this process's opossum, or the shared machine before its retry time. */
    const check = (agent: AgentRecord) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const retryAt = agent.circuitState === "open" ? retryAtOf(agent.circuitSnapshot) : null
        const localOpen = proxy.isOpen(agent.id)
        const forced = agent.circuitState === "open" && forcedOf(agent.circuitSnapshot)
        if (!forced && !localOpen && (retryAt === null || now >= retryAt)) return
        const retryAfterSeconds = Math.max(1, Math.ceil(((retryAt ?? now + resetTimeoutMs) - now) / 1000))
        return yield* new Unavailable({
          code: "AGENT_UNAVAILABLE",
          message: forced
            ? "the platform holds the agent's circuit breaker open; nothing was charged"
            : "the agent's circuit breaker is open after repeated failures; nothing was charged",
          details: { agentId: agent.id, circuitState: "open", retryAfterSeconds, ...(forced ? { forced: true } : {}) }
        })
      })

    /** Call outcomes seen in any process close a recovering circuit, or re-open a half-open one. */
    const observe = (agentId: string, known: CircuitState, success: boolean) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        if (success && known !== "closed") yield* deliver(agentId, { type: "RESET", at })
        if (!success && known === "half-open") yield* deliver(agentId, { type: "TRIP", at })
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning(`circuit observation for ${agentId} failed`, cause)))

    return { deliver, check, observe, resetTimeoutMs } as const
  }),
  dependencies: [MachineHost.Default, AgentProxy.Default, AgentCache.Default, CircuitMachine.Default]
}) {}
