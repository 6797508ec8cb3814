// How an outbound agent call fails: the failure kinds callers see, and helpers to read Node and undici error chains.
import { Data } from "effect"

export type AgentFailureKind =
  | "timeout"
  | "connection"
  | "http_status"
  | "invalid_json"
  | "too_large"
  | "blocked_url"
  | "redirect"
  | "circuit_open"

export class AgentCallError extends Data.TaggedError("AgentCallError")<{
  readonly kind: AgentFailureKind
  readonly message: string
  readonly status?: number
  readonly durationMs: number
}> {}

/** The caller's fiber was interrupted; not the agent's fault, so not counted by the breaker. */
export class CallInterrupted extends Error {}

export const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined

/** The error and up to four of its causes (undici wraps socket errors). */
export const causes = function* (error: unknown): Generator<unknown> {
  let current = error
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    yield current
    current = current instanceof Error ? current.cause : undefined
  }
}
