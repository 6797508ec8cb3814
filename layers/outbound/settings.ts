// Limits of outbound agent calls read from the environment: execution timeout, response size cap, breaker reset time.
import { Config, type ConfigError, Effect } from "effect"

export const DEFAULT_EXECUTION_TIMEOUT_MS = 30_000
export const DEFAULT_AGENT_RESPONSE_MAX_BYTES = 1024 * 1024
export const DEFAULT_CIRCUIT_RESET_TIMEOUT_MS = 30_000

export interface OutboundSettings {
  readonly executionTimeoutMs: number
  readonly responseMaxBytes: number
  readonly resetTimeout: number
}

export const outboundSettings: Effect.Effect<OutboundSettings, ConfigError.ConfigError> = Effect.gen(function* () {
  const executionTimeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(
    Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS),
    Config.validate({ message: "EXECUTION_TIMEOUT_MS must be between 1 and 600000", validation: (n) => n >= 1 && n <= 600_000 })
  )
  const responseMaxBytes = yield* Config.integer("AGENT_RESPONSE_MAX_BYTES").pipe(
    Config.withDefault(DEFAULT_AGENT_RESPONSE_MAX_BYTES),
    Config.validate({
      message: "AGENT_RESPONSE_MAX_BYTES must be between 1024 and 268435456",
      validation: (n) => n >= 1024 && n <= 256 * 1024 * 1024
    })
  )
  const resetTimeout = yield* Config.integer("CIRCUIT_RESET_TIMEOUT_MS").pipe(
    Config.withDefault(DEFAULT_CIRCUIT_RESET_TIMEOUT_MS),
    Config.validate({ message: "CIRCUIT_RESET_TIMEOUT_MS must be between 10 and 86400000", validation: (n) => n >= 10 && n <= 86_400_000 })
  )
  return { executionTimeoutMs, responseMaxBytes, resetTimeout }
})
