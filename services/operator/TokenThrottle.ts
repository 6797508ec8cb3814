// The one check of the operator token, wherever it is accepted (the operator API's bearer, the /ops login): the right
// token is always accepted (compared in constant time before anything else); wrong ones are limited per client address,
// counted together in PostgreSQL (RateLimits.loginAttempt), with a metric and a log line.
import { Effect, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { operatorTokenFailures } from "../../layers/observability/Metrics.js"
import { MAX_TOKEN_CHARS } from "../../src/domain/tokenStrength.js"
import { RateLimits } from "../executions/RateLimits.js"

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest()
/** Hashed in place of an offered token too long to be the configured one, so the comparison costs the same. */
const TOO_LONG = digest("")

/**
 * Constant time: both sides are hashed to the same length first, so neither the content nor the length leaks; an offered
 * token longer than any accepted one (MAX_TOKEN_CHARS) is not hashed, so what one comparison costs does not grow with it.
 */
export const tokenMatches = (offered: string, token: Redacted.Redacted<string>): boolean => {
  const tooLong = offered.length > MAX_TOKEN_CHARS
  const equal = timingSafeEqual(tooLong ? TOO_LONG : digest(offered), digest(Redacted.value(token)))
  return equal && !tooLong
}

export type Surface = "api" | "console"

export type TokenCheck =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Refused" }
  /** A wrong token from an address over its limit of failures: try again in `retryAfterSeconds`. */
  | { readonly _tag: "Locked"; readonly retryAfterSeconds: number }

export class TokenThrottle extends Effect.Service<TokenThrottle>()("operator/TokenThrottle", {
  effect: Effect.gen(function* () {
    const limits = yield* RateLimits

    /**
     * One attempt from `address` with `offered`. The right token is accepted whatever the address did before: anyone
     * sharing the operator's address (a NAT, a proxy without TRUST_PROXY) could otherwise lock the operator out with a
     * few wrong guesses. Guessing stays hopeless because the token is strong (checked at start outside the devnet), not
     * because of the limit. A wrong token is counted; past the limit it is answered 429 and given back (the lock never grows).
     */
    const check = (surface: Surface, address: string, offered: string, token: Redacted.Redacted<string>): Effect.Effect<TokenCheck> =>
      Effect.gen(function* () {
        if (tokenMatches(offered, token)) return { _tag: "Accepted" } as const
        const attempt = yield* limits.loginAttempt(address)
        if (!attempt.allowed) {
          operatorTokenFailures.inc({ surface, outcome: "locked" })
          yield* Effect.logWarning("operator token attempt refused: too many failures from this address", { surface, address, retryAfterSeconds: attempt.retryAfterSeconds })
          return { _tag: "Locked", retryAfterSeconds: attempt.retryAfterSeconds } as const
        }
        yield* attempt.settle(true)
        operatorTokenFailures.inc({ surface, outcome: "refused" })
        yield* Effect.logWarning("operator token refused", { surface, address })
        return { _tag: "Refused" } as const
      }).pipe(Effect.withSpan("TokenThrottle.check"))

    return { check } as const
  }),
  dependencies: [RateLimits.Default]
}) {}
