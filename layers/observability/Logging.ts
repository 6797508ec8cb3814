// The one logger of the service: every Effect.log* line as one JSON object (production) or one readable line (devnet).
import { Cause, Config, Context, Effect, FiberRef, FiberRefs, HashMap, Inspectable, Layer, Logger, LogLevel, Option, Redacted, Tracer } from "effect"
import { globalValue } from "effect/GlobalValue"
import { AppConfig } from "../Config.js"

export type LogFormat = "json" | "pretty"

/** The format in force (the start-up banner follows it). */
export class LogSettings extends Context.Tag("observability/LogSettings")<LogSettings, { readonly format: LogFormat }>() {}

const LEVELS: Record<string, LogLevel.LogLevel> = {
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

const levelConfig = Config.string("LOG_LEVEL").pipe(
  Config.withDefault("info"),
  Config.validate({ message: `LOG_LEVEL must be one of ${Object.keys(LEVELS).join(", ")}`, validation: (s) => s.toLowerCase() in LEVELS }),
  Config.map((s) => LEVELS[s.toLowerCase()] ?? LogLevel.Info)
)

const formatConfig = (fallback: LogFormat) =>
  Config.literal("json", "pretty")("LOG_FORMAT").pipe(Config.withDefault(fallback))

/** A message or annotation as JSON-safe data: bigints as strings, Redacted as "<redacted>", errors by name and message. */
const plain = (u: unknown): unknown => {
  if (typeof u === "bigint" || typeof u === "symbol" || typeof u === "function") return String(u)
  if (u instanceof Error && !("toJSON" in u)) return { name: u.name, message: u.message }
  return Inspectable.toJSON(u)
}

/** A bound on one line: a runaway message cannot fill the disk. */
const MAX_TEXT = 8_000
const clip = (s: string) => (s.length > MAX_TEXT ? `${s.slice(0, MAX_TEXT)}…` : s)

/** W3C ids only: a disabled tracer's spans say "noop". */
const HEX_TRACE = /^[0-9a-f]{32}$/
const currentTrace = (refs: FiberRefs.FiberRefs): { traceId?: string; spanId?: string } => {
  const span = Context.getOption(FiberRefs.getOrDefault(refs, FiberRef.currentContext), Tracer.ParentSpan)
  if (Option.isNone(span) || !HEX_TRACE.test(span.value.traceId)) return {}
  return { traceId: span.value.traceId, spanId: span.value.spanId }
}

const isPlainRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && Object.getPrototypeOf(u) === Object.prototype

/**
 * The fields of one log record, in a stable order: time, level, msg, the fields of a plain object passed with the
 * message (`Effect.logInfo("text", { key: value })`), other values under `data`, the annotations, trace, error.
 */
const recordOf = (options: Logger.Logger.Options<unknown>): Record<string, unknown> => {
  const parts: ReadonlyArray<unknown> = Array.isArray(options.message) ? options.message : [options.message]
  const texts: Array<string> = []
  const fields: Record<string, unknown> = {}
  const data: Array<unknown> = []
  for (const part of parts) {
    if (typeof part === "string") texts.push(part)
    else if (isPlainRecord(part)) for (const [key, value] of Object.entries(part)) fields[key] = plain(value)
    else data.push(plain(part))
  }
  const record: Record<string, unknown> = {
    time: options.date.toISOString(),
    level: options.logLevel.label.toLowerCase(),
    msg: clip(texts.join(" ")),
    ...fields
  }
  if (data.length > 0) record["data"] = data.length === 1 ? data[0] : data
  for (const [key, value] of HashMap.toEntries(options.annotations)) record[key] = plain(value)
  Object.assign(record, currentTrace(options.context))
  if (!Cause.isEmpty(options.cause)) record["error"] = clip(Cause.pretty(options.cause, { renderErrorCause: true }))
  return record
}

export const jsonLine = (options: Logger.Logger.Options<unknown>): string => Inspectable.stringifyCircular(recordOf(options))

const prettyValue = (value: unknown): string =>
  typeof value === "string" && /^[^\s"=]+$/.test(value) ? value : typeof value === "number" || typeof value === "boolean" ? String(value) : Inspectable.stringifyCircular(value)

/** `12:00:00.123 INFO  POST /api/v1/execute 200  durationMs=12.3 requestId=…` (then the error, indented). */
export const prettyLine = (options: Logger.Logger.Options<unknown>): string => {
  const { time, level, msg, error, ...fields } = recordOf(options)
  const clock = typeof time === "string" ? time.slice(11, 23) : ""
  // Fields the message already shows (a request line's method, route and status) are not repeated.
  const shown = new Set(String(msg).split(" "))
  const rest = Object.entries(fields)
    .filter(([, v]) => !((typeof v === "string" || typeof v === "number") && shown.has(String(v))))
    .map(([k, v]) => `${k}=${prettyValue(v)}`)
    .join(" ")
  const head = `${clock} ${String(level).toUpperCase().padEnd(5)} ${String(msg)}${rest === "" ? "" : `  ${rest}`}`
  return typeof error === "string" ? `${head}\n  ${error.replaceAll("\n", "\n  ")}` : head
}

/**
 * Values no log line may show, for the fiber that logs: the request's credentials and payment headers
 * (layers/observability/requests.ts adds them for the time of the request).
 */
export const currentLogSecrets = globalValue(Symbol.for("observability/currentLogSecrets"), () => FiberRef.unsafeMake<ReadonlyArray<string>>([]))

/** Runs `self` with `values` scrubbed from every line it logs. */
export const withLogSecrets = (values: ReadonlyArray<string>) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  values.length === 0 ? self : Effect.locallyWith(self, currentLogSecrets, (known) => [...known, ...values])

/** Shorter strings are too common to replace safely (and too short to be a credential). */
const MIN_SECRET = 8

export const scrub = (text: string, secrets: Iterable<string>): string => {
  let out = text
  for (const secret of secrets) if (secret.length >= MIN_SECRET && out.includes(secret)) out = out.replaceAll(secret, "<redacted>")
  return out
}

/** Writes whole lines to stdout (one write per record, so lines from concurrent fibers never interleave). */
const makeLogger = (format: LogFormat, configured: ReadonlyArray<string>) => {
  const line = format === "json" ? jsonLine : prettyLine
  return Logger.make<unknown, void>((options) => {
    const scoped = FiberRefs.getOrDefault(options.context, currentLogSecrets)
    process.stdout.write(`${scrub(scrub(line(options), configured), scoped)}\n`)
  })
}

/** The parts of a URL that may carry a key: credentials, and a path or query (hosted RPCs put API keys there). */
const urlSecrets = (raw: string): Array<string> => {
  try {
    const url = new URL(raw)
    const rest = `${url.pathname === "/" ? "" : url.pathname}${url.search}`
    return [url.username, decodeURIComponent(url.password), url.password, ...(rest === "" ? [] : [raw, rest])]
  } catch {
    return [raw]
  }
}

/** Every configured secret, as it could appear in an error message (a viem error quotes the RPC URL, keys and all). */
const configuredSecrets = Effect.gen(function* () {
  const config = yield* AppConfig
  const metricsToken = yield* Config.option(Config.string("METRICS_TOKEN"))
  const otlpHeaders = yield* Config.option(Config.string("OTEL_EXPORTER_OTLP_HEADERS"))
  const values = (o: Option.Option<Redacted.Redacted<string>>) => Option.toArray(Option.map(o, Redacted.value))
  const key = Option.toArray(Option.map(config.treasuryPrivateKey, Redacted.value))
  return [
    ...values(config.operatorToken),
    ...values(config.clientIdSecret),
    ...values(config.webhookSecretKey),
    ...values(config.webhookSecretKeyPrevious),
    ...values(config.chainTokenSecret),
    ...key,
    ...key.map((k) => k.slice(2)),
    ...values(config.databaseUrl).flatMap(urlSecrets),
    ...Option.toArray(config.chainRpcUrl).flatMap(urlSecrets),
    ...Option.toArray(config.facilitatorUrl).flatMap(urlSecrets),
    ...Option.toArray(metricsToken),
    ...Option.toArray(otlpHeaders).flatMap((h) => h.split(",").map((pair) => pair.slice(pair.indexOf("=") + 1).trim()))
  ].filter((s) => s.length >= MIN_SECRET)
})

/**
 * Replaces Effect's default logger for everything built on top of this layer (handlers, workers, the server) and sets
 * the minimum level. Configured secrets are scrubbed from every line. LOG_FORMAT (json | pretty) defaults to pretty in devnet and json with CHAIN_RPC_URL (production).
 */
export const LoggingLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const { chainMode } = yield* AppConfig
    const format = yield* formatConfig(chainMode === "devnet" ? "pretty" : "json")
    const level = yield* levelConfig
    const secrets = yield* configuredSecrets
    return Layer.mergeAll(
      Logger.replace(Logger.defaultLogger, makeLogger(format, secrets)),
      Logger.minimumLogLevel(level),
      Layer.succeed(LogSettings, { format })
    )
  })
)
