// The HTTP server: the API with its handlers, error shaping into the envelope, body limits, CORS, OpenAPI and /docs.
import {
  HttpApiBuilder,
  HttpApiError,
  HttpApiSchema,
  HttpIncomingMessage,
  HttpMiddleware,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { SqlError } from "@effect/sql"
import { Cause, Clock, Config, Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { McpHttpLive } from "../mcp/Http.js"
import { observeRequests } from "../../layers/observability/requests.js"
import { apiRoutes, makeRouteMatcher } from "../../layers/observability/routes.js"
import {
  BadRequest,
  ErrorClasses,
  InternalError,
  LengthRequired,
  NotFound,
  PayloadTooLarge,
  PaymentRequired,
  PaymentRequiredResponse,
  RateLimited,
  Unavailable,
  UnsupportedMediaType
} from "../domain/Errors.js"
import { jsonNestingDepth, MAX_JSON_DEPTH } from "../domain/Json.js"
import { Api } from "./Api.js"
import { makeUnpaidBodyBudget, UnpaidBodyConfig } from "./unpaidBodies.js"
import { AgentsHttpLive } from "./AgentsHttp.js"
import { AnalyticsHttpLive, ReputationHttpLive } from "./AnalyticsHttp.js"
import { DiscoveryHttpLive } from "./DiscoveryHttp.js"
import { X402DiscoveryHttpLive } from "./X402DiscoveryHttp.js"
import { ChainsHttpLive } from "./ChainsHttp.js"
import { PayersHttpLive } from "./PayersHttp.js"
import { ChannelsHttpLive } from "./ChannelsHttp.js"
import { ExecutionHttpLive } from "./ExecutionHttp.js"
import { HealthHttpLive } from "./HealthHttp.js"
import { METRICS_PATH, MetricsRouteLive } from "./Metrics.js"
import { DisputesHttpLive, OperatorDisputesHttpLive } from "./DisputesHttp.js"
import { OperatorChannelsHttpLive } from "./OperatorChannelsHttp.js"
import { OperatorHttpLive } from "./OperatorHttp.js"
import { WebhooksHttpLive } from "./WebhooksHttp.js"
import { PaymentsHttpLive, PlatformHttpLive } from "./PaymentsHttp.js"
import { opsConsole } from "../ops/routes.js"
import { DocsLive } from "./Docs.js"

/** Declared errors, by class: encoded here into the envelope with their status. */
const encoders = new Map<unknown, (error: unknown) => Effect.Effect<HttpServerResponse.HttpServerResponse>>(
  [...ErrorClasses, [PaymentRequired, PaymentRequiredResponse] as const].map(([cls, wire]) => {
    const schema: Schema.Schema.AnyNoContext = wire
    const encode = Schema.encodeUnknown(schema)
    const status = HttpApiSchema.getStatusError(schema)
    return [cls, (error: unknown) => Effect.orDie(Effect.map(encode(error), (body) => HttpServerResponse.unsafeJson(body, { status })))]
  })
)
const encoderFor = (error: unknown) =>
  typeof error === "object" && error !== null ? encoders.get(error.constructor) : undefined

/** Only `application/json` (with parameters): the framework parses nothing else as JSON. */
const JSON_TYPE = /^\s*application\/json\s*(?:;|$)/i

/** Framework messages quote the offending value; keep them short. */
const clip = (message: string) => (message.length > 300 ? `${message.slice(0, 300)}…` : message)

const encoded = (error: BadRequest | NotFound | PayloadTooLarge | InternalError | Unavailable) =>
  encoderFor(error)?.(error) ?? Effect.die(error)

/** Maps what the framework raises on bad input to our envelope; anything unexpected becomes a logged 500 without internals. */
const shapeFailure = (cause: Cause.Cause<unknown>) => {
  const failure = Cause.failureOption(cause)
  const error = Option.isSome(failure) ? failure.value : Option.getOrUndefined(Cause.dieOption(cause))
  if (error === undefined) return Effect.interrupt // the client went away
  const encode = encoderFor(error)
  if (encode !== undefined) return encode(error)
  if (error instanceof HttpApiError.HttpApiDecodeError) {
    return encoded(
      new BadRequest({
        code: "VALIDATION_ERROR",
        message: "the request failed validation",
        details: { issues: error.issues.slice(0, 50).map((issue) => ({ path: issue.path.map(String).join("."), message: clip(issue.message) })) }
      })
    )
  }
  if (HttpServerError.isServerError(error)) {
    if (error._tag === "RouteNotFound") {
      return encoded(new NotFound({ code: "NOT_FOUND", message: `no route for ${error.request.method} ${error.request.url}` }))
    }
    if (error._tag === "RequestError") {
      const tooLarge = error.cause instanceof Error && error.cause.message === "maxBytes exceeded"
      return encoded(
        tooLarge
          ? new PayloadTooLarge({ code: "PAYLOAD_TOO_LARGE", message: "the request body is too large" })
          : new BadRequest({ code: "INVALID_JSON", message: "the request body is not valid JSON" })
      )
    }
  }
  if (error instanceof SqlError.SqlError) {
    // The database did not answer (paused, restarting, unreachable): a bounded 503 the client can retry, not a 500.
    return Effect.logWarning("database unavailable", cause).pipe(
      Effect.zipRight(encoded(new Unavailable({ code: "SERVICE_UNAVAILABLE", message: "the database is not answering; nothing was charged; try again shortly" }))),
      Effect.map(HttpServerResponse.setHeader("Retry-After", "5"))
    )
  }
  return Effect.logError("unhandled failure", cause).pipe(
    Effect.zipRight(encoded(new InternalError({ code: "INTERNAL_ERROR", message: "internal error; nothing was charged that was not delivered" })))
  )
}

const envelopeMiddleware = HttpApiBuilder.middleware(
  Api,
  Effect.map(Effect.all([AppConfig, UnpaidBodyConfig]), ([{ maxBodyBytes }, unpaidBodies]) => {
    const budget = makeUnpaidBodyBudget(unpaidBodies)
    /** A large body over its address's budget: answered before a byte of it is read. */
    const overBudget = (retryAfterSeconds: number) => {
      const error = new RateLimited({
        code: "RATE_LIMITED",
        message: `too many large request bodies from your address that did not succeed: above ${budget.freeBytes} bytes, at most ${budget.bytesPerMinute} bytes a minute are read before a request succeeds; nothing was read or charged; try again in ${retryAfterSeconds} seconds`,
        details: { retryAfterSeconds, freeBytes: budget.freeBytes, bytesPerMinute: budget.bytesPerMinute }
      })
      return (encoderFor(error)?.(error) ?? Effect.die(error)).pipe(Effect.map(HttpServerResponse.setHeader("Retry-After", String(retryAfterSeconds))))
    }
    return (app) => Effect.suspend(() => {
      // Reserved before the body is read; given back when the request succeeded (a paid call, an authenticated change).
      let succeeded = () => {}
      return Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        if (request.method === "POST" || request.method === "PATCH" || request.method === "PUT") {
          const length = request.headers["content-length"]
          if (length !== undefined && Number(length) > maxBodyBytes) {
            return yield* new PayloadTooLarge({
              code: "PAYLOAD_TOO_LARGE",
              message: `request bodies are limited to ${maxBodyBytes} bytes`,
              details: { limitBytes: maxBodyBytes }
            })
          }
          if (length !== undefined) {
            const address = Option.getOrElse(request.remoteAddress, () => "unknown")
            const reservation = budget.reserve(address, Number(length), yield* Clock.currentTimeMillis)
            if (reservation._tag === "Refused") return yield* overBudget(reservation.retryAfterSeconds)
            succeeded = reservation.succeeded
          }
          if (request.headers["transfer-encoding"] !== undefined && length === undefined) {
            // A chunked body over the limit would be cut off with the socket before we could answer 413.
            return yield* new LengthRequired({ code: "LENGTH_REQUIRED", message: "send request bodies with a Content-Length header" })
          }
          const hasBody = length !== undefined && length !== "0"
          const type = request.headers["content-type"]
          if (hasBody && (type === undefined || !JSON_TYPE.test(type))) {
            return yield* new UnsupportedMediaType({
              code: "UNSUPPORTED_MEDIA_TYPE",
              message: "request bodies must be application/json",
              details: { contentType: type ?? null }
            })
          }
          if (hasBody) {
            // Read (and cache) the body once to refuse absurd nesting before any recursive decoding sees it.
            const text = yield* request.text
            if (jsonNestingDepth(text) > MAX_JSON_DEPTH) {
              return yield* new BadRequest({
                code: "VALIDATION_ERROR",
                message: `JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
                details: { issues: [{ path: "", message: `nested deeper than ${MAX_JSON_DEPTH} levels` }] }
              })
            }
          }
        }
        return yield* app
      }).pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(maxBodyBytes)),
        Effect.catchAllCause(shapeFailure),
        Effect.tap((response) => {
          if (response.status < 400) succeeded()
        })
      )
    })
  })
)

const cors = HttpApiBuilder.middlewareCors({
  allowedHeaders: [
    "content-type",
    "authorization",
    "x-payment",
    "payment-signature",
    "x-agent-wallet",
    "x-agent-signature",
    "x-client-id",
    "x-chain-token",
    "x-chain-budget",
    "x-remainder",
    "x-credit-payment",
    "x-payer-signature",
    "x-payer-signed-at",
    "x-request-id",
    "access-control-expose-headers",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id"
  ],
  exposedHeaders: ["X-Request-Id", "X-PAYMENT-RESPONSE", "PAYMENT-RESPONSE", "PAYMENT-REQUIRED", "X-PAYMENT-USED", "X-Client-Id", "X-CREDIT-RECEIPT", "X-RateLimit-Agent-Remaining", "X-RateLimit-Client-Remaining", "Retry-After", "Mcp-Session-Id"]
})

/** The API with every handler; needs the domain services. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([HealthHttpLive, AgentsHttpLive, ExecutionHttpLive, ChannelsHttpLive, PaymentsHttpLive, PlatformHttpLive, OperatorHttpLive, DisputesHttpLive, OperatorDisputesHttpLive, OperatorChannelsHttpLive, DiscoveryHttpLive, AnalyticsHttpLive, ReputationHttpLive, WebhooksHttpLive, ChainsHttpLive, PayersHttpLive, X402DiscoveryHttpLive])
)

/**
 * X-Forwarded-For/-Host name the client only when a proxy we run sets them: TRUST_PROXY=true behind one, off by default
 * (anyone can send the headers, so a direct client would choose its own address).
 */
const forwardedHeaders = Config.boolean("TRUST_PROXY").pipe(
  Config.withDefault(false),
  Config.map((trusted) => (trusted ? HttpMiddleware.xForwardedHeaders : <A>(app: A) => app))
)

/** Probes and scrapes: logged at debug, never traced. */
const QUIET_ROUTES = ["/health", METRICS_PATH]

/** The console's routes (src/ops/routes.ts) by template; a console path not listed here is labelled `/ops/*`. */
const OPS_ROUTES: ReadonlyArray<readonly [string, string]> = [
  ["GET", "/ops"],
  ["POST", "/ops/login"],
  ["POST", "/ops/logout"],
  ["POST", "/ops/levers"],
  ["GET", "/ops/actions"],
  ["GET", "/ops/overview"],
  ["GET", "/ops/search"],
  ["GET", "/ops/agents/:id"],
  ["GET", "/ops/machines/:kind"],
  ["GET", "/ops/machines/:kind/:id"]
]

/** Request id, request log line and HTTP metrics by route template (layers/observability/requests.ts). */
const observed = observeRequests({
  routes: makeRouteMatcher(
    apiRoutes(Api, [["GET", METRICS_PATH], ["GET", "/docs"], ["GET", "/openapi.json"], ["GET", "/mcp"], ["POST", "/mcp"], ["DELETE", "/mcp"], ...OPS_ROUTES]),
    [["/ops", "/ops/*"]]
  ),
  quiet: new Set(QUIET_ROUTES)
})

/** Serves the API (plus /openapi.json, /docs, /metrics, the MCP endpoint /mcp) and the operator console (/ops, answered before the API) on whatever HttpServer is provided. */
export const HttpLive = Layer.unwrapEffect(
  Effect.map(forwardedHeaders, (middleware) => HttpApiBuilder.serve((app) => observed(middleware(opsConsole(app)))))
).pipe(
  Layer.locallyWith(HttpMiddleware.currentTracerDisabledWhen, (off) => (request) => off(request) || QUIET_ROUTES.includes(request.url.split("?")[0] ?? "")),
  Layer.provide(MetricsRouteLive),
  Layer.provide(DocsLive),
  Layer.provide(envelopeMiddleware),
  Layer.provide(cors),
  Layer.provide(McpHttpLive),
  Layer.provide(ApiLive)
)
