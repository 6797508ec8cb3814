// OpenTelemetry traces over OTLP/HTTP (Effect's own OtlpTracer, no OTel SDK) when OTEL_EXPORTER_OTLP_ENDPOINT is set;
// otherwise the tracer is off and the HTTP server opens no span at all.
import { FetchHttpClient, Headers, HttpMiddleware } from "@effect/platform"
import { OtlpSerialization, OtlpTracer } from "@effect/opentelemetry"
import { Config, ConfigError, Duration, Effect, Either, Layer, Option, Redacted } from "effect"
import { setSpansEnabled } from "./span.js"

/** Header values never copied into span attributes: credentials, payments and their signatures, chain tokens. */
export const REDACTED_HEADERS: ReadonlyArray<string | RegExp> = [
  "authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  /^x-payment/,
  /^payment-/,
  /signature/,
  /token/,
  /secret/
]

const httpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: `${name} must be an http(s) URL`,
      validation: (s) => {
        try {
          return ["http:", "https:"].includes(new URL(s).protocol)
        } catch {
          return false
        }
      }
    })
  )

/** `k=v,k2=v2` with URL-encoded values (the OTel convention), e.g. an API key for a hosted collector. */
export const parseOtlpHeaders = (text: string): Either.Either<Record<string, string>, string> => {
  const headers: Record<string, string> = {}
  for (const pair of text.split(",").map((p) => p.trim()).filter((p) => p !== "")) {
    const eq = pair.indexOf("=")
    if (eq <= 0) return Either.left("OTEL_EXPORTER_OTLP_HEADERS must be key=value pairs separated by commas")
    try {
      headers[pair.slice(0, eq).trim().toLowerCase()] = decodeURIComponent(pair.slice(eq + 1).trim())
    } catch {
      return Either.left("OTEL_EXPORTER_OTLP_HEADERS has a malformed percent-encoded value")
    }
  }
  return Either.right(headers)
}

export interface TracingSettings {
  /** The full traces URL (…/v1/traces); none: tracing off. */
  readonly url: Option.Option<string>
  readonly protocol: "http/protobuf" | "http/json"
  readonly headers: Redacted.Redacted<Record<string, string>>
  readonly serviceName: string
  readonly exportIntervalMs: number
}

export const tracingSettings = Effect.gen(function* () {
  const disabled = yield* Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false))
  const base = yield* Config.option(httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT"))
  const traces = yield* Config.option(httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
  const protocol = yield* Config.string("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").pipe(
    Config.orElse(() => Config.string("OTEL_EXPORTER_OTLP_PROTOCOL")),
    Config.withDefault("http/protobuf"),
    Config.validate({
      message: "OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json (gRPC is not supported)",
      validation: (p): p is "http/protobuf" | "http/json" => p === "http/protobuf" || p === "http/json"
    })
  )
  const headerText = yield* Config.redacted("OTEL_EXPORTER_OTLP_HEADERS").pipe(Config.withDefault(Redacted.make("")))
  const headers = yield* Either.match(parseOtlpHeaders(Redacted.value(headerText)), {
    onLeft: (message) => Effect.fail(ConfigError.InvalidData(["OTEL_EXPORTER_OTLP_HEADERS"], message)),
    onRight: Effect.succeed
  })
  const serviceName = yield* Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("agent-marketplace"))
  const exportIntervalMs = yield* Config.integer("OTEL_BSP_SCHEDULE_DELAY").pipe(
    Config.withDefault(5_000),
    Config.validate({ message: "OTEL_BSP_SCHEDULE_DELAY must be between 10 and 60000 (ms)", validation: (n) => n >= 10 && n <= 60_000 })
  )
  // The spec's rule: the signal-specific URL is used as is; the base gets /v1/traces appended.
  const url = disabled
    ? Option.none()
    : Option.orElse(traces, () => Option.map(base, (b) => `${b.replace(/\/+$/, "")}/v1/traces`))
  return { url, protocol, headers: Redacted.make(headers), serviceName, exportIntervalMs } satisfies TracingSettings
})

const exporter = (s: TracingSettings, url: string) =>
  OtlpTracer.layer({
    url,
    resource: { serviceName: s.serviceName },
    headers: Redacted.value(s.headers),
    exportInterval: Duration.millis(s.exportIntervalMs),
    maxBatchSize: 512,
    shutdownTimeout: Duration.seconds(3)
  }).pipe(
    Layer.provide(s.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
    Layer.provide(FetchHttpClient.layer)
  )

/**
 * Off (no endpoint): spans are no-ops and the HTTP server skips its per-request span (URL parsing and header copying
 * included). On: every span is exported in batches; header values in REDACTED_HEADERS never reach span attributes.
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.map(tracingSettings, (settings) =>
    Option.match(settings.url, {
      onNone: () =>
        Layer.mergeAll(
          Layer.setTracerEnabled(false),
          Layer.locallyScoped(HttpMiddleware.currentTracerDisabledWhen, () => true),
          Layer.effectDiscard(Effect.sync(() => setSpansEnabled(false)))
        ),
      onSome: (url) =>
        Layer.mergeAll(
          Layer.effectDiscard(Effect.sync(() => setSpansEnabled(true))),
          exporter(settings, url),
          Layer.setTracerEnabled(true),
          Layer.locallyScoped(Headers.currentRedactedNames, REDACTED_HEADERS)
        )
    }))
)
