// The chain token's key (CHAIN_TOKEN_SECRET; a public devnet default like the client ids'), issuing tokens with their
// 30-second lifetime, and checking a presented X-Chain-Token into the spec's 401 errors.
import { Clock, Config, ConfigError, Effect, Either, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import { AppConfig } from "../../layers/Config.js"
import { Unauthorized } from "../../src/domain/Errors.js"
import { CHAIN_TOKEN_TTL_MS, type ChainTokenPayload, signChainToken, verifyChainToken } from "./token.js"

/** The devnet's key is public like its accounts: tokens made with it are worthless outside devnet, where it is refused. */
const DEVNET_SECRET = createHash("sha256").update("agent-marketplace devnet chain tokens").digest()

export class ChainTokens extends Effect.Service<ChainTokens>()("chains/ChainTokens", {
  effect: Effect.gen(function* () {
    const config = yield* AppConfig
    const configured = yield* Config.option(
      Config.redacted(
        Config.string("CHAIN_TOKEN_SECRET").pipe(
          Config.validate({ message: "CHAIN_TOKEN_SECRET must be at least 32 characters", validation: (s) => s.length >= 32 })
        )
      )
    )
    if (Option.isNone(configured) && config.chainMode !== "devnet") {
      return yield* Effect.fail(
        ConfigError.MissingData(["CHAIN_TOKEN_SECRET"], "CHAIN_RPC_URL is set, so CHAIN_TOKEN_SECRET is required (at least 32 characters)")
      )
    }
    const key = Option.match(configured, { onNone: () => DEVNET_SECRET, onSome: (s) => Buffer.from(Redacted.value(s)) })

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
