// Per request: an X-Request-Id (the client's when sane, else ours) on the response and on every log line of the
// request, one request log line, and the HTTP metrics by route template. Never a header value is logged, and the
// request's credentials and payment headers are scrubbed from any line logged while it runs.
import { HttpApp, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Exit, FiberRef, LogLevel, Option, Tracer } from "effect"
import { globalValue } from "effect/GlobalValue"
import { randomUUID } from "node:crypto"
import { withLogSecrets } from "./Logging.js"
import { httpDuration, httpRequests } from "./Metrics.js"
import type { RouteMatcher } from "./routes.js"

/** Ids of proxies and clients (UUIDs, ULIDs, `req_…`, `Root=1-…`) pass; anything longer or stranger is replaced. */
const REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:=+/-]{0,127}$/
const TRACEPARENT = /^00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/
const HEX_TRACE = /^[0-9a-f]{32}$/

export const requestIdOf = (header: string | undefined): string =>
  header !== undefined && REQUEST_ID.test(header) ? header : randomUUID()

/** The caller's trace id (valid, non-zero W3C traceparent), for log lines when we record no span ourselves. */
const callerTraceId = (header: string | undefined): string | undefined => {
  const id = header === undefined ? undefined : TRACEPARENT.exec(header)?.[1]
  return id === undefined || /^0+$/.test(id) ? undefined : id
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s)

/** Request headers whose values no log line of the request may show (an error message could quote them). */
const SECRET_HEADERS = ["authorization", "x-payment", "payment-signature", "x-agent-signature", "x-chain-token", "x-client-id", "cookie"]

const secretsOf = (headers: Readonly<Record<string, string | undefined>>): Array<string> =>
  SECRET_HEADERS.flatMap((name) => {
    const value = headers[name]
    if (value === undefined) return []
    const credential = /^\S+\s+(\S+)$/.exec(value)?.[1] // "Bearer <token>"
    return credential === undefined ? [value] : [value, credential]
  })

/** Fields a handler adds to its request's log line (the execution id and the agent's error of a 502), per request. */
const currentRequestNotes = globalValue(
  Symbol.for("observability/currentRequestNotes"),
  () => FiberRef.unsafeMake<Record<string, unknown> | undefined>(undefined)
)

/**
 * Adds `fields` to the log line of the request being served (a no-op outside one): the line then says which actor the
 * answer is about and why it failed, e.g. `{ executionId, cause }` on a 502.
 */
export const noteOnRequestLine = (fields: Readonly<Record<string, unknown>>) =>
  Effect.flatMap(FiberRef.get(currentRequestNotes), (notes) => Effect.sync(() => notes !== undefined && Object.assign(notes, fields)))

export interface RequestObservability {
  readonly routes: RouteMatcher
  /** Route templates logged at debug rather than info and never traced (probes and scrapes); still counted. */
  readonly quiet: ReadonlySet<string>
}

/** A server middleware (HttpApiBuilder.serve): it runs inside the server span, around the error handling. */
export const observeRequests = (options: RequestObservability) =>
<E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
    const started = performance.now()
    const requestId = requestIdOf(request.headers["x-request-id"])
    const template = options.routes.match(request.method, request.url)
    const quiet = template !== undefined && options.quiet.has(template)
    const span = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
    const traced = Option.isSome(span) && HEX_TRACE.test(span.value.traceId)
    const notes: Record<string, unknown> = {}
    const finish = (exit: Exit.Exit<HttpServerResponse.HttpServerResponse, E>) => {
      const status = HttpServerError.exitResponse(exit).status
      const seconds = (performance.now() - started) / 1000
      const method = request.method
      const route = template ?? "unmatched"
      httpRequests.inc({ method, route, status: String(status) })
      httpDuration.observe({ method, route, status_class: `${Math.floor(status / 100)}xx` }, seconds)
      const query = request.url.indexOf("?")
      const path = clip(query === -1 ? request.url : request.url.slice(0, query), 300)
      const level = status >= 500 ? LogLevel.Warning : quiet ? LogLevel.Debug : LogLevel.Info
      const traceId = traced ? undefined : callerTraceId(request.headers["traceparent"])
      return Effect.logWithLevel(level, `${method} ${template ?? path} ${status}`, {
        method,
        route: template ?? path,
        path,
        status,
        durationMs: Math.round(seconds * 10_000) / 10,
        ...notes,
        ...(traceId === undefined ? {} : { traceId })
      })
    }
    return (quiet ? Effect.withTracerEnabled(app, false) : app).pipe(
      HttpApp.withPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeader(response, "x-request-id", requestId))),
      Effect.locally(currentRequestNotes, notes),
      Effect.onExit(finish),
      Effect.annotateLogs("requestId", requestId),
      withLogSecrets(secretsOf(request.headers))
    )
  })
