// How long a synchronous paid call may keep its client waiting once its payment is accepted (PAID_CALL_DEADLINE_MS).
import { Config } from "effect"

/** Beyond the agent's own timeout, what the settlement may add before the call answers with its status URL instead. */
export const SETTLEMENT_SLACK_MS = 30_000
/** EXECUTION_TIMEOUT_MS's own ceiling: the default is capped here. */
const MAX_DEADLINE_MS = 600_000

/**
 * Default: the agent's timeout (EXECUTION_TIMEOUT_MS) plus 30 s (at most 10 min): an agent that answers within its time and a settlement
 * included within a few blocks (Base: 2 s, Ethereum: 12 s) answer together; a chain or provider slower than that gets a
 * 202 with the status URL and the work goes on. At least the agent's timeout, so a slow agent within its time is never
 * cut short by it.
 */
export const paidCallDeadlineMs = (executionTimeoutMs: number) =>
  Config.integer("PAID_CALL_DEADLINE_MS").pipe(
    Config.withDefault(Math.min(executionTimeoutMs + SETTLEMENT_SLACK_MS, MAX_DEADLINE_MS)),
    Config.validate({
      message: `PAID_CALL_DEADLINE_MS must be at least EXECUTION_TIMEOUT_MS (${executionTimeoutMs}) and at most ${MAX_DEADLINE_MS}`,
      validation: (n) => n >= executionTimeoutMs && n <= MAX_DEADLINE_MS
    })
  )
