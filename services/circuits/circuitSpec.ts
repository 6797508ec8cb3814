// How the host runs an agent's circuit breaker machine: the snapshot lives on the agent row; an open circuit arms a
// durable PROBE timer.
import { SqlClient } from "@effect/sql"
import { Config, Effect, Option, Schema } from "effect"
import { DEFAULT_CIRCUIT_RESET_TIMEOUT_MS } from "../../layers/AgentProxy.js"
import { circuitMachine } from "../../machines/circuit.js"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot, startMachine } from "../../machines/step.js"

export interface CircuitRow {
  readonly circuitSnapshot: unknown
}

const Probe = Schema.Struct({ type: Schema.Literal("PROBE"), at: Schema.Number })

export type CircuitSpec = MachineSpec<typeof circuitMachine, CircuitRow, "clearDeadline">

export class CircuitMachine extends Effect.Service<CircuitMachine>()("circuits/CircuitMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const resetTimeoutMs = yield* Config.integer("CIRCUIT_RESET_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_CIRCUIT_RESET_TIMEOUT_MS))
    const spec: CircuitSpec = {
      machine: circuitMachine,
      pure: ["clearDeadline"],
      lock: (agentId) =>
        sql<CircuitRow>`SELECT circuit_snapshot FROM agents WHERE id = ${agentId} FOR UPDATE`.pipe(Effect.map((rows) => Option.fromNullable(rows[0]))),
      snapshot: (row) => (isPersistedSnapshot(row.circuitSnapshot) ? row.circuitSnapshot : startMachine(circuitMachine, { resetTimeoutMs }).persisted),
      actions: {
        scheduleProbe: ({ at }, { schedule }) => schedule({ type: "PROBE", at }),
        // The agent row carries the state (save); caches are invalidated by the caller once the change committed.
        circuitChanged: () => Effect.void
      },
      save: (agentId, _row, step) =>
        sql`UPDATE agents SET circuit_state = ${step.state}, circuit_snapshot = ${JSON.stringify(step.persisted)}, updated_at = now()
            WHERE id = ${agentId}`.pipe(Effect.asVoid),
      timerEvent: (stored) => Option.getRight(Schema.decodeUnknownEither(Probe)(stored))
    }
    return { spec, resetTimeoutMs } as const
  })
}) {}
