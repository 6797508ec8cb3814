// Each agent's circuit breaker machine: driven by opossum's state changes and by call outcomes, persisted on the agent row.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Effect, Stream } from "effect"
import { AgentProxy, type BreakerChange, DEFAULT_CIRCUIT_RESET_TIMEOUT_MS } from "../layers/AgentProxy.js"
import { type CircuitEvent, circuitMachine, type CircuitState } from "../machines/circuit.js"
import type { AgentRecord } from "../src/domain/Agent.js"
import { Unavailable } from "../src/domain/Errors.js"
import { AgentCache } from "./AgentCache.js"
import { actionsOf, Machines, type PersistedSnapshot, startMachine, stepMachine } from "./Machines.js"

const eventFor = (change: BreakerChange): CircuitEvent =>
  change.state === "open"
    ? { type: "TRIP", at: change.at }
    : change.state === "half-open"
    ? { type: "PROBE", at: change.at }
    : { type: "RESET", at: change.at }

const isPersisted = (value: unknown): value is PersistedSnapshot =>
  typeof value === "object" && value !== null && "value" in value && "context" in value

/** When an open circuit accepts a trial call, from the stored snapshot. */
const retryAtOf = (snapshot: unknown): number | null => {
  if (!isPersisted(snapshot)) return null
  const context = snapshot.context
  return typeof context === "object" && context !== null && "retryAt" in context && typeof context.retryAt === "number"
    ? context.retryAt
    : null
}

export class Circuits extends Effect.Service<Circuits>()("Circuits", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const machines = yield* Machines
    const proxy = yield* AgentProxy
    const cache = yield* AgentCache
    const resetTimeoutMs = yield* Config.integer("CIRCUIT_RESET_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_CIRCUIT_RESET_TIMEOUT_MS))

    /** Applies one event to the agent's circuit machine; the agent row, the history and any probe timer commit together. */
    const deliver = (agentId: string, event: CircuitEvent) =>
      Effect.gen(function* () {
        const changed = yield* sql.withTransaction(
          Effect.gen(function* () {
            const rows = yield* sql<{ circuitSnapshot: unknown }>`SELECT circuit_snapshot FROM agents WHERE id = ${agentId} FOR UPDATE`
            const row = rows[0]
            if (row === undefined) return false
            const persisted = isPersisted(row.circuitSnapshot)
              ? row.circuitSnapshot
              : startMachine(circuitMachine, { resetTimeoutMs }).persisted
            const step = stepMachine(circuitMachine, persisted, event)
            if (!step.changed) return false
            for (const { at } of actionsOf<{ at: number }>(step, "scheduleProbe")) {
              yield* machines.schedule("circuit", agentId, { type: "PROBE", at }, at)
            }
            yield* sql`UPDATE agents SET circuit_state = ${step.state}, circuit_snapshot = ${JSON.stringify(step.persisted)}, updated_at = now()
                       WHERE id = ${agentId}`
            yield* machines.record("circuit", agentId, [{ event, from: step.from, to: step.state, at: event.at }])
            return step.from !== step.state
          })
        )
        if (changed) yield* cache.invalidate(agentId)
        return changed
      }).pipe(Effect.withSpan("Circuits.deliver"))

    // opossum's state changes in this process drive the shared, persisted machine.
    yield* Stream.fromPubSub(proxy.breakerChanges).pipe(
      Stream.runForEach((change) =>
        deliver(change.agentId, eventFor(change)).pipe(
          Effect.catchAllCause((cause) => Effect.logError(`circuit event for ${change.agentId} failed`, cause))
        )),
      Effect.forkScoped
    )

    yield* machines.registerTimerHandler("circuit", (timer, markFired) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* markFired
          const at = yield* Clock.currentTimeMillis
          yield* deliver(timer.actorId, { type: "PROBE", at })
        })
      ))

    /** Fail fast (nothing charged) while the circuit is open: this process's opossum, or the shared machine before its retry time. */
    const check = (agent: AgentRecord) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const retryAt = agent.circuitState === "open" ? retryAtOf(agent.circuitSnapshot) : null
        const localOpen = proxy.isOpen(agent.id)
        if (!localOpen && (retryAt === null || now >= retryAt)) return
        const retryAfterSeconds = Math.max(1, Math.ceil(((retryAt ?? now + resetTimeoutMs) - now) / 1000))
        return yield* new Unavailable({
          code: "AGENT_UNAVAILABLE",
          message: "the agent's circuit breaker is open after repeated failures; nothing was charged",
          details: { agentId: agent.id, circuitState: "open", retryAfterSeconds }
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
  })
}) {}
