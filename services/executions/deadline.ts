// The paid call's clocks: how long a synchronous paid call may keep its client waiting once its payment is accepted
// (PAID_CALL_DEADLINE_MS), the retry window and the attempt's deadline.
import { Config, Effect } from "effect"
import { DEFAULT_EXECUTION_TIMEOUT_MS } from "../../layers/AgentProxy.js"

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

/** Extra time past the agent timeout after which a running attempt with no recorded result is declared dead. */
const DEADLINE_GRACE_MS = 60_000

/** The pipeline's clocks: the retry window, the attempt's deadline (its machine's timer), the sync answer's wait. */
export interface Timing {
  readonly retryWindowMs: number
  readonly deadlineMs: number
  readonly answerWithinMs: number
}

export const timing = Effect.gen(function* () {
  const timeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS))
  const retryWindowMs = 1000 * (yield* Config.integer("EXECUTION_RETRY_WINDOW_SECONDS").pipe(Config.withDefault(600)))
  return { retryWindowMs, deadlineMs: timeoutMs + DEADLINE_GRACE_MS, answerWithinMs: yield* paidCallDeadlineMs(timeoutMs) } satisfies Timing
})
