// The /mcp route (Streamable HTTP): picks the session, a new session or a stateless answer for each request, hands the
// request to the SDK's web-standard transport and streams its Response back. Every failure is a JSON-RPC error.
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Layer, Option, Stream } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { McpSessions } from "./Sessions.js"

export const MCP_PATH = "/mcp"

/** The headers the transport reads; nothing else of the request is handed over. */
const FORWARDED = ["accept", "content-type", "host", "origin", "mcp-session-id", "mcp-protocol-version", "last-event-id"] as const
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

const toResponse = (response: Response) => {
  const type = response.headers.get("content-type") ?? ""
  const body = response.body
  if (body === null || !type.startsWith("text/event-stream")) return HttpServerResponse.fromWeb(response)
  const events = Stream.fromReadableStream({ evaluate: () => body, onError: (error) => error })
  return HttpServerResponse.stream(Stream.concat(Stream.succeed(OPENED), events), {
    status: response.status,
    headers: response.headers,
    contentType: type
  })
}

export const McpHttpLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const sessions = yield* McpSessions
    const url = `${(yield* AppConfig).publicBaseUrl}${MCP_PATH}`

    const serve = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const method = request.method
      if (method !== "GET" && method !== "POST" && method !== "DELETE") {
        return rpcError(405, -32000, "Method not allowed.", { allow: "GET, POST, DELETE" })
      }
      // The body (if any) was read, size-checked and nesting-checked by the API's envelope middleware; this is its cache.
      const body = method === "POST" ? yield* Effect.option(Effect.flatMap(request.text, (text) => Effect.try(() => parseJson(text)))) : Option.some(undefined)
      if (Option.isNone(body)) return rpcError(400, -32700, "Parse error: Invalid JSON")
      const sessionId = request.headers["mcp-session-id"]
      const acceptsStream = (request.headers["accept"] ?? "").includes("text/event-stream")

      if (sessionId !== undefined) {
        const session = yield* sessions.find(sessionId)
        if (Option.isNone(session)) return rpcError(404, -32001, "Session not found")
        return toResponse(yield* sessions.handle(session.value, webRequest(url, request), body.value))
      }
      if (method !== "POST") return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required")
      if (isInitializeRequest(body.value) && acceptsStream) {
        const opened = yield* sessions.open(webRequest(url, request), body.value)
        if (Option.isNone(opened)) {
          return rpcError(503, -32000, "Too many MCP sessions are open; try again later, or send requests without a session (stateless)", { "retry-after": "30" })
        }
        return toResponse(opened.value)
      }
      // No session and either a JSON-only Accept header or not an initialize request: a stateless JSON answer.
      return toResponse(yield* sessions.stateless(webRequest(url, request, BOTH), body.value))
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.logError("MCP request failed", cause).pipe(Effect.as(rpcError(500, -32603, "Internal error")))),
      Effect.withSpan("Mcp.request")
    )

    yield* router.all(MCP_PATH, serve)
  })
).pipe(Layer.provide(McpSessions.Default))
