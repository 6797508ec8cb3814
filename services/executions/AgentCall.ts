// One call to an agent's execution endpoint, its output checked against the capability's outputSchema, as the
// execution machine's event.
import { Clock, Effect, Either } from "effect"
import { AgentProxy } from "../../layers/AgentProxy.js"
import { AppConfig } from "../../layers/Config.js"
import type { ExecutionEvent } from "../../machines/execution.js"
import type { AgentRecord, Capability } from "../../src/domain/Agent.js"
import { unstorableStrings } from "../../src/domain/Json.js"
import { settlementPolicy } from "../../src/domain/Trust.js"
import { JsonSchemas } from "../agents/JsonSchemas.js"
import { withSpan } from "../../layers/observability/span.js"

export interface CallOutcome {
  readonly success: boolean
  readonly event: Extract<ExecutionEvent, { type: "AGENT_SUCCEEDED" | "AGENT_FAILED" }>
  /** A metered capability's usage as the agent reported it (`X-Usage-Units`); read by metering.ts. */
  readonly reportedUnits?: string
}

export class AgentCall extends Effect.Service<AgentCall>()("executions/AgentCall", {
  effect: Effect.gen(function* () {
    const proxy = yield* AgentProxy
    const schemas = yield* JsonSchemas
    const { devnetHoldMs } = yield* AppConfig
    /** The tier's hold, shortened in devnet by DEVNET_HOLD_SECONDS so a new owner reaches a withdrawal in minutes. */
    const holdMs = (agent: AgentRecord) => Math.min(settlementPolicy(agent.trustTier).delayMs, devnetHoldMs ?? Number.POSITIVE_INFINITY)

    /** Calls the agent once; the outcome as the machine event to record (the output or error rides on it). */
    const call = (
      row: { readonly id: string; readonly input: unknown },
      agent: AgentRecord,
      capability: Capability,
      chained: { readonly chainToken?: string; readonly traceparent?: string } = {}
    ) =>
      Effect.gen(function* () {
        const reply = yield* Effect.either(
          proxy.call({ agentId: agent.id, url: agent.endpoints.execution, requestId: row.id, capabilityId: capability.id, input: row.input, ...chained })
        )
        const at = yield* Clock.currentTimeMillis
        const outcome = Either.flatMap(reply, (ok) => {
          const problems = [
            ...unstorableStrings(ok.body, "output"),
            ...(capability.outputSchema === undefined ? [] : schemas.validate(capability.outputSchema, ok.body, "output"))
          ]
          return problems.length === 0
            ? Either.right(ok)
            : Either.left({
              kind: "invalid_output" as const,
              message: `the agent's output does not match its outputSchema: ${problems.slice(0, 5).map((p) => `${p.path} ${p.message}`).join("; ")}`,
              durationMs: ok.durationMs
            })
        })
        if (Either.isRight(outcome)) {
          return {
            success: true,
            event: {
              type: "AGENT_SUCCEEDED",
              at,
              releaseDelayMs: holdMs(agent),
              output: outcome.right.body,
              durationMs: outcome.right.durationMs
            },
            ...(outcome.right.usageUnits === undefined ? {} : { reportedUnits: outcome.right.usageUnits })
          } satisfies CallOutcome
        }
        const failure = outcome.left
        return {
          success: false,
          event: { type: "AGENT_FAILED", at, timedOut: failure.kind === "timeout", error: failure.message, kind: failure.kind, durationMs: failure.durationMs }
        } satisfies CallOutcome
      }).pipe(withSpan("Executions.callAgent"))

    return { call } as const
  }),
  dependencies: [AgentProxy.Default, JsonSchemas.Default]
}) {}
