// Service configuration from the environment, validated at start with clear messages.
import { Config, ConfigError, Context, Effect, Layer, Option, Redacted } from "effect"
import * as path from "node:path"
import { MAX_TOKEN_CHARS, tokenWeakness } from "../src/domain/tokenStrength.js"

export type ChainMode = "devnet" | "rpc"

export interface AppConfigShape {
  readonly port: number
  readonly host: string
  /** Unset: an embedded PostgreSQL under `dataDir`. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  readonly chainMode: ChainMode
  readonly chainRpcUrl: Option.Option<string>
  readonly usdcAddress: Option.Option<`0x${string}`>
  readonly treasuryPrivateKey: Option.Option<Redacted.Redacted<`0x${string}`>>
  readonly facilitatorUrl: Option.Option<string>
  /** Unset in devnet: generated at start and printed. */
  readonly operatorToken: Option.Option<Redacted.Redacted<string>>
  readonly allowPrivateUrls: boolean
  /** Base URL used in payment challenges and status URLs; defaults to http://HOST:PORT. */
  readonly publicBaseUrl: string
  readonly maxBodyBytes: number
  /** How long a signed payment must still be valid for us to accept it (settlement headroom). */
  readonly paymentMinValiditySeconds: number
  /** maxTimeoutSeconds in our 402 challenges. */
  readonly paymentTimeoutSeconds: number
  readonly agentCacheTtlMs: number
  /** Key of the HMAC binding X-Client-Id to the payer (disputes); devnet uses a public fixed value. */
  readonly clientIdSecret: Option.Option<Redacted.Redacted<string>>
  /** AES-256-GCM key (64 hex) for webhook secrets at rest; devnet uses a public fixed value. */
  readonly webhookSecretKey: Option.Option<Redacted.Redacted<string>>
  /** During a key rotation: the key secrets were stored under before (read only; `npm run webhooks:rekey` moves them). */
  readonly webhookSecretKeyPrevious: Option.Option<Redacted.Redacted<string>>
  /** Key of the HMAC that signs chain tokens; devnet uses a public fixed value. */
  readonly chainTokenSecret: Option.Option<Redacted.Redacted<string>>
  /** Devnet only (DEVNET_HOLD_SECONDS): the longest an agent's earnings are held before release, whatever its tier. */
  readonly devnetHoldMs?: number
}

export class AppConfig extends Context.Tag("Config/AppConfig")<AppConfig, AppConfigShape>() {}

const hexKey = /^0x[0-9a-fA-F]{64}$/
const address = /^0x[0-9a-fA-F]{40}$/

const url = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: `${name} must be an http(s) URL`,
      validation: (s) => {
        try {
          const u = new URL(s)
          return u.protocol === "http:" || u.protocol === "https:"
        } catch {
          return false
        }
      }
    })
  )

export const appConfig = Effect.gen(function* () {
  const port = yield* Config.port("PORT").pipe(Config.withDefault(3000))
  const host = yield* Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
  const databaseUrl = yield* Config.option(Config.redacted("DATABASE_URL"))
  const dataDir = path.resolve(yield* Config.string("DATA_DIR").pipe(Config.withDefault("./.data")))
  const chainRpcUrl = yield* Config.option(url("CHAIN_RPC_URL"))
  const chainMode: ChainMode = Option.isSome(chainRpcUrl) ? "rpc" : "devnet"
  const usdcAddress = yield* Config.option(
    Config.string("USDC_ADDRESS").pipe(
      Config.validate({ message: "USDC_ADDRESS must be 0x followed by 40 hex characters", validation: (s) => address.test(s) }),
      Config.map((s) => s as `0x${string}`)
    )
  )
  const treasuryPrivateKey = yield* Config.option(
    Config.redacted(
      Config.string("TREASURY_PRIVATE_KEY").pipe(
        Config.validate({ message: "TREASURY_PRIVATE_KEY must be 0x followed by 64 hex characters", validation: (s) => hexKey.test(s) }),
        Config.map((s) => s as `0x${string}`)
      )
    )
  )
  const facilitatorUrl = yield* Config.option(url("FACILITATOR_URL"))
  const operatorToken = yield* Config.option(
    Config.redacted(
      Config.string("OPERATOR_TOKEN").pipe(
        Config.validate({
          message: `OPERATOR_TOKEN must be 16 to ${MAX_TOKEN_CHARS} characters`,
          validation: (s) => s.length >= 16 && s.length <= MAX_TOKEN_CHARS
        })
      )
    )
  )
  const clientIdSecret = yield* Config.option(
    Config.redacted(
      Config.string("CLIENT_ID_SECRET").pipe(
        Config.validate({ message: "CLIENT_ID_SECRET must be at least 32 characters", validation: (s) => s.length >= 32 })
      )
    )
  )
  const aesKey = (name: string) =>
    Config.option(
      Config.redacted(
        Config.string(name).pipe(
          Config.validate({ message: `${name} must be 32 bytes as 64 hex characters`, validation: (s) => /^[0-9a-fA-F]{64}$/.test(s) })
        )
      )
    )
  const webhookSecretKey = yield* aesKey("WEBHOOK_SECRET_KEY")
  const webhookSecretKeyPrevious = yield* aesKey("WEBHOOK_SECRET_KEY_PREVIOUS")
  const chainTokenSecret = yield* Config.option(
    Config.redacted(
      Config.string("CHAIN_TOKEN_SECRET").pipe(
        Config.validate({ message: "CHAIN_TOKEN_SECRET must be at least 32 characters", validation: (s) => s.length >= 32 })
      )
    )
  )
  const allowPrivateUrls = yield* Config.boolean("ALLOW_PRIVATE_URLS").pipe(Config.withDefault(chainMode === "devnet"))
  const publicBaseUrl = yield* url("PUBLIC_BASE_URL").pipe(
    Config.withDefault(`http://${host.includes(":") ? `[${host}]` : host}:${port}`)
  )
  const maxBodyBytes = yield* Config.integer("MAX_BODY_BYTES").pipe(
    Config.withDefault(1024 * 1024),
    Config.validate({ message: "MAX_BODY_BYTES must be between 1024 and 67108864", validation: (n) => n >= 1024 && n <= 64 * 1024 * 1024 })
  )
  const paymentMinValiditySeconds = yield* Config.integer("PAYMENT_MIN_VALIDITY_SECONDS").pipe(Config.withDefault(6))
  const paymentTimeoutSeconds = yield* Config.integer("PAYMENT_TIMEOUT_SECONDS").pipe(Config.withDefault(120))
  const agentCacheTtlMs = yield* Config.integer("AGENT_CACHE_TTL_MS").pipe(Config.withDefault(30_000))
  const devnetHoldSeconds = yield* Config.option(
    Config.integer("DEVNET_HOLD_SECONDS").pipe(
      Config.validate({ message: "DEVNET_HOLD_SECONDS must be between 0 and 86400", validation: (n) => n >= 0 && n <= 86_400 })
    )
  )
  if (chainMode === "rpc" && Option.isSome(devnetHoldSeconds)) {
    return yield* Effect.fail(ConfigError.InvalidData([], "DEVNET_HOLD_SECONDS applies to the devnet only: unset it with CHAIN_RPC_URL"))
  }

  if (chainMode === "rpc") {
    const missing = [
      Option.isNone(usdcAddress) ? "USDC_ADDRESS" : undefined,
      // Also with FACILITATOR_URL: the facilitator takes payments in, only the treasury key pays anything out.
      Option.isNone(treasuryPrivateKey) ? "TREASURY_PRIVATE_KEY" : undefined,
      Option.isNone(operatorToken) ? "OPERATOR_TOKEN" : undefined,
      Option.isNone(clientIdSecret) ? "CLIENT_ID_SECRET" : undefined,
      Option.isNone(webhookSecretKey) ? "WEBHOOK_SECRET_KEY" : undefined,
      Option.isNone(chainTokenSecret) ? "CHAIN_TOKEN_SECRET" : undefined
    ].filter((m): m is string => m !== undefined)
    if (missing.length > 0) {
      return yield* Effect.fail(
        ConfigError.MissingData([], `CHAIN_RPC_URL is set, so these settings are required: ${missing.join(", ")}`)
      )
    }
    // Outside the devnet the token, not the per-address throttle, is what keeps guessing hopeless (docs/security.md).
    const weak = Option.flatMap(operatorToken, (token) => Option.fromNullable(tokenWeakness("OPERATOR_TOKEN", Redacted.value(token))))
    if (Option.isSome(weak)) return yield* Effect.fail(ConfigError.InvalidData([], weak.value))
  }
  return {
    port,
    host,
    databaseUrl,
    dataDir,
    chainMode,
    chainRpcUrl,
    usdcAddress,
    treasuryPrivateKey,
    facilitatorUrl,
    operatorToken,
    allowPrivateUrls,
    publicBaseUrl: publicBaseUrl.replace(/\/+$/, ""),
    maxBodyBytes,
    paymentMinValiditySeconds,
    paymentTimeoutSeconds,
    agentCacheTtlMs,
    clientIdSecret,
    webhookSecretKey,
    webhookSecretKeyPrevious,
    chainTokenSecret,
    ...(Option.isSome(devnetHoldSeconds) ? { devnetHoldMs: devnetHoldSeconds.value * 1000 } : {})
  } satisfies AppConfigShape
})

export const ConfigLive = Layer.effect(AppConfig, appConfig)
