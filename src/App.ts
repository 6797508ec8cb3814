// Layer composition: infrastructure, domain services, workers and the HTTP server, shared by main and the tests.
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { createServer } from "node:http"
import { Chain, ChainLive } from "../layers/Chain.js"
import { AppConfig } from "../layers/Config.js"
import { PaymentVerifier } from "../layers/PaymentVerifier.js"
import { DatabaseInfo, PgLive } from "../layers/Pg.js"
import { UrlGuard } from "../layers/UrlGuard.js"
import { AgentCache } from "../services/AgentCache.js"
import { Agents } from "../services/Agents.js"
import { JsonSchemas } from "../services/JsonSchemas.js"
import { Ledger } from "../services/Ledger.js"
import { Outbox } from "../services/Outbox.js"
import { Payments, PaymentsRecoveryLive } from "../services/Payments.js"
import { AgentProxy } from "../layers/AgentProxy.js"
import { Balances } from "../services/Balances.js"
import { Callbacks, CallbacksWorkerLive } from "../services/Callbacks.js"
import { Circuits } from "../services/Circuits.js"
import { Executions } from "../services/Executions.js"
import { Machines, TimersWorkerLive } from "../services/Machines.js"
import { RateLimitPruneLive, RateLimits } from "../services/RateLimits.js"
import { Refunds, RefundsWorkerLive } from "../services/Refunds.js"
import { HealthProbesLive, Reputation } from "../services/Reputation.js"
import { OperatorToken } from "./http/OperatorHttp.js"
import { HttpLive } from "./http/Server.js"

/** The operator token: configured, or (devnet only; config refuses its absence elsewhere) generated for this run. */
export const OperatorTokenLive = Layer.effect(
  OperatorToken,
  Effect.map(AppConfig, (config) =>
    Option.getOrElse(config.operatorToken, () => Redacted.make(`devnet-${randomBytes(18).toString("base64url")}`)))
)

/** Domain services and background workers on top of the database and the given chain layer. */
/** Background workers (timers, settlement recovery, refunds, callbacks, probes); BACKGROUND_WORKERS=false leaves them to be driven by hand (tests). */
const WorkersLive = Layer.unwrapEffect(
  Effect.map(Config.boolean("BACKGROUND_WORKERS").pipe(Config.withDefault(true)), (enabled) =>
    enabled
      ? Layer.mergeAll(PaymentsRecoveryLive, TimersWorkerLive(), RefundsWorkerLive, CallbacksWorkerLive, HealthProbesLive, RateLimitPruneLive)
      : Layer.empty)
)

export const makeServicesLive = <E>(chain: Layer.Layer<Chain, E, AppConfig>) =>
  WorkersLive.pipe(
    Layer.provideMerge(Layer.mergeAll(Executions.Default, Balances.Default, OperatorTokenLive)),
    Layer.provideMerge(Layer.mergeAll(Agents.Default, Circuits.Default, Reputation.Default, RateLimits.Default, Refunds.Default, Callbacks.Default)),
    Layer.provideMerge(Payments.Default),
    Layer.provideMerge(
      Layer.mergeAll(
        PaymentVerifier.Default,
        UrlGuard.Default,
        JsonSchemas.Default,
        Ledger.Default,
        Outbox.Default,
        AgentCache.Default,
        Machines.Default,
        AgentProxy.Default
      )
    ),
    Layer.provideMerge(Layer.mergeAll(PgLive, chain))
  )

const NodeServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ host, port }) => NodeHttpServer.layer(createServer, { port, host }))
)

/** Prints where everything is once the server listens. */
const BannerLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const chain = yield* Chain
    const db = yield* DatabaseInfo
    const token = yield* OperatorToken
    const address = yield* HttpServer.addressFormattedWith((url) => Effect.succeed(url))
    const lines = [
      `agent marketplace listening on ${address}`,
      `  mode:            ${chain.mode}`,
      `  database:        ${db.mode}${db.mode === "embedded" ? ` (data in ${config.dataDir})` : ""}`,
      `  chain RPC:       ${chain.rpcUrl} (chain id ${chain.chainId}, x402 network "${chain.network}")`,
      `  USDC:            ${chain.usdc.address}`,
      `  treasury:        ${chain.treasury}`,
      `  docs:            ${address}/docs  (OpenAPI: ${address}/openapi.json)`,
      ...(chain.mode === "devnet" && Option.isNone(config.operatorToken) ? [`  operator token:  ${Redacted.value(token)}`] : [])
    ]
    yield* Effect.sync(() => console.log(lines.join("\n")))
  })
)

/** The whole service for a given chain layer (ChainLive in production, an attached devnet in tests). */
/**
 * Spans cost CPU on every request and statement (with a stack trace each) and go nowhere until an exporter is wired
 * (the operators issue brings OpenTelemetry): TRACING=true turns them on.
 */
const TracingLive = Layer.unwrapEffect(
  Effect.map(Config.boolean("TRACING").pipe(Config.withDefault(false)), (enabled) => Layer.setTracerEnabled(enabled))
)

export const makeAppLive = <E>(chain: Layer.Layer<Chain, E, AppConfig>, options: { readonly banner: boolean } = { banner: true }) =>
  (options.banner ? Layer.merge(HttpLive, BannerLive) : HttpLive).pipe(
    Layer.provide(NodeServerLive),
    Layer.provideMerge(makeServicesLive(chain)),
    Layer.provide(TracingLive)
  )

export const AppLive = makeAppLive(ChainLive)
