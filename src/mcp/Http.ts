// The /mcp route (Streamable HTTP, stateless): every POST is answered by a server of its own, so any process of any
// instance behind any balancer answers it; GET (a server-initiated event stream) and DELETE (ending a session) are 405,
// as the MCP specification allows a server that sends nothing unprompted and keeps no sessions. Every failure is a
// JSON-RPC error.
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option, Stream } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { eventsOf, type McpAnswer, McpRequests } from "./Requests.js"

export const MCP_PATH = "/mcp"

/** The headers the transport reads; nothing else of the request is handed over. */
const FORWARDED = ["accept", "content-type", "host", "origin", "mcp-protocol-version"] as const
const BOTH = "application/json, text/event-stream"

const parseJson = (text: string): unknown => JSON.parse(text)

const rpcError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson({ jsonrpc: "2.0", error: { code, message }, id: null }, { status, headers })

const webRequest = (url: string, request: HttpServerRequest.HttpServerRequest, accept?: string) => {
  const headers = new Headers()
  for (const name of FORWARDED) {
    const value = request.headers[name]
    if (value !== undefined) headers.set(name, value)
  }
  if (accept !== undefined) headers.set("accept", accept)
  return new Request(url, { method: request.method, headers })
}

/**
 * Node sends a response's headers with its first body bytes, and an SDK event stream may stay silent (until a result,
 * or the 15-second keep-alive): an SSE comment at once lets the client see its stream open.
 */
const OPENED = new TextEncoder().encode(": stream open\n\n")

const toResponse = (answer: McpAnswer) => {
  if (answer._tag === "Plain") return HttpServerResponse.fromWeb(answer.response)
  return HttpServerResponse.stream(Stream.concat(Stream.succeed(OPENED), eventsOf(answer)), {
    status: answer.response.status,
    headers: answer.response.headers,
    contentType: answer.response.headers.get("content-type") ?? "text/event-stream"
  })
}

export const McpHttpLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const requests = yield* McpRequests
    const url = `${(yield* AppConfig).publicBaseUrl}${MCP_PATH}`

    const serve = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (request.method !== "POST") {
        const message = request.method === "GET"
          ? "Method not allowed: this server sends nothing unprompted, so there is no event stream to open; POST requests."
          : request.method === "DELETE"
          ? "Method not allowed: this server keeps no sessions, so there is none to end."
          : "Method not allowed."
        return rpcError(405, -32000, message, { allow: "POST" })
      }
      // The body was read, size-checked and nesting-checked by the API's envelope middleware; this is its cache.
      const body = yield* Effect.option(Effect.flatMap(request.text, (text) => Effect.try(() => parseJson(text))))
      if (Option.isNone(body)) return rpcError(400, -32700, "Parse error: Invalid JSON")
      // A client that lists event streams gets one; any other gets one JSON body (the transport wants both listed).
      const streams = (request.headers["accept"] ?? "").includes("text/event-stream")
      return toResponse(yield* requests.answer(webRequest(url, request, streams ? undefined : BOTH), body.value, !streams))
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.logError("MCP request failed", cause).pipe(Effect.as(rpcError(500, -32603, "Internal error")))),
      Effect.withSpan("Mcp.request")
    )

    yield* router.all(MCP_PATH, serve)
  })
).pipe(Layer.provide(McpRequests.Default))
