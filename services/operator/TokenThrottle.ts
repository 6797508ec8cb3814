// The one check of the operator token, wherever it is accepted (the operator API's bearer, the /ops login): failed
// attempts are limited per client address, counted together in PostgreSQL (RateLimits.loginAttempt), with a metric and a log line.
import { Effect, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { operatorTokenFailures } from "../../layers/observability/Metrics.js"
import { RateLimits } from "../executions/RateLimits.js"

/** Constant time: both sides are hashed to the same length first, so neither the content nor the length leaks. */
export const tokenMatches = (offered: string, token: Redacted.Redacted<string>): boolean => {
  const digest = (s: string) => createHash("sha256").update(s, "utf8").digest()
  return timingSafeEqual(digest(offered), digest(Redacted.value(token)))
}

export type Surface = "api" | "console"

export type TokenCheck =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Refused" }
  /** Over the limit: nothing was checked; try again in `retryAfterSeconds`. */
  | { readonly _tag: "Locked"; readonly retryAfterSeconds: number }

export class TokenThrottle extends Effect.Service<TokenThrottle>()("operator/TokenThrottle", {
  effect: Effect.gen(function* () {
    const limits = yield* RateLimits

    /**
     * One attempt from `address` with `offered`: counted before the token is compared (so parallel guesses cannot slip
     * under the limit), given back when it matched; refused unchecked while the address is over its limit.
     */
    const check = (surface: Surface, address: string, offered: string, token: Redacted.Redacted<string>): Effect.Effect<TokenCheck> =>
      Effect.gen(function* () {
        const attempt = yield* limits.loginAttempt(address)
        if (!attempt.allowed) {
          operatorTokenFailures.inc({ surface, outcome: "locked" })
          yield* Effect.logWarning("operator token attempt refused: too many failures from this address", { surface, address, retryAfterSeconds: attempt.retryAfterSeconds })
          return { _tag: "Locked", retryAfterSeconds: attempt.retryAfterSeconds } as const
        }
        const matches = tokenMatches(offered, token)
        yield* attempt.settle(!matches)
        if (matches) return { _tag: "Accepted" } as const
        operatorTokenFailures.inc({ surface, outcome: "refused" })
        yield* Effect.logWarning("operator token refused", { surface, address })
        return { _tag: "Refused" } as const
      }).pipe(Effect.withSpan("TokenThrottle.check"))

    return { check } as const
  }),
  dependencies: [RateLimits.Default]
}) {}
