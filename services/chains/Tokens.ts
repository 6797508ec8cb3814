// The chain token's key (CHAIN_TOKEN_SECRET; a public devnet default like the client ids'), issuing tokens with their
// 30-second lifetime, and checking a presented X-Chain-Token into the spec's 401 errors.
import { Clock, Effect, Either, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import { AppConfig } from "../../layers/Config.js"
import { Unauthorized } from "../../src/domain/Errors.js"
import { CHAIN_TOKEN_TTL_MS, type ChainTokenPayload, signChainToken, verifyChainToken } from "./token.js"

/** The devnet's key is public like its accounts: tokens made with it are worthless outside devnet, where it is refused. */
const DEVNET_SECRET = createHash("sha256").update("agent-marketplace devnet chain tokens").digest()

export class ChainTokens extends Effect.Service<ChainTokens>()("chains/ChainTokens", {
  effect: Effect.gen(function* () {
    const config = yield* AppConfig
    // Required outside devnet (layers/Config.ts refuses to start without it).
    const key = Option.match(config.chainTokenSecret, { onNone: () => DEVNET_SECRET, onSome: (s) => Buffer.from(Redacted.value(s)) })

    /** A token for the payload, good for 30 seconds from now. */
    const issue = (payload: Omit<ChainTokenPayload, "exp">) =>
      Effect.map(Clock.currentTimeMillis, (now) => signChainToken(key, { ...payload, exp: now + CHAIN_TOKEN_TTL_MS }))

    /** The payload of a presented token: signature, shape, then expiry (nothing from an unsigned token is read). */
    const check = (token: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Either.match(verifyChainToken(key, token.trim(), now), {
          onRight: Effect.succeed,
          onLeft: (rejection) =>
            Effect.fail(
              rejection.reason === "expired"
                ? new Unauthorized({
                  code: "CHAIN_TOKEN_EXPIRED",
                  message: "the chain token is older than 30 seconds; use the childToken of your latest chained response",
                  details: { expiredAt: new Date(rejection.expiredAt).toISOString() }
                })
                : new Unauthorized({ code: "CHAIN_TOKEN_INVALID", message: rejection.message })
            )
        }))

    return { issue, check } as const
  })
}) {}
