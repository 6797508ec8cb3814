// Every MCP request answered on its own: a fresh SDK server on a stateless Streamable HTTP transport (no session id
// is issued, any that a client sends is accepted), so any process of any instance answers any request and nothing is
// kept between requests. A request whose client accepts event streams is answered as one (keep-alives hold a long
// paid call open through proxies); otherwise as one JSON body.
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { Data, Effect, Stream } from "effect"
import { McpProtocol } from "./Protocol.js"

/** The SDK transport threw instead of answering (a bug on one side or the other). */
export class TransportFailed extends Data.TaggedError("TransportFailed")<{ readonly cause: unknown }> {}

/** An answer: a plain Response, or an event stream with what ends the request's server once the stream has ended. */
export type McpAnswer =
  | { readonly _tag: "Plain"; readonly response: Response }
  | { readonly _tag: "Events"; readonly response: Response; readonly body: ReadableStream<Uint8Array>; readonly done: Effect.Effect<void> }

export class McpRequests extends Effect.Service<McpRequests>()("mcp/McpRequests", {
  effect: Effect.gen(function* () {
    const protocol = yield* McpProtocol

    const close = (server: Server) => Effect.promise(() => server.close().catch(() => undefined))

    const connected = (json: boolean) =>
      Effect.suspend(() => {
        const server = protocol.make()
        // No sessionIdGenerator: the SDK's stateless mode (no Mcp-Session-Id issued or checked).
        const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: json })
        return Effect.promise(() => server.connect(transport)).pipe(Effect.as({ server, transport }))
      })

    /**
     * Answers one POST. A JSON answer is complete when the transport returns it, so the server is closed then; an event
     * stream is written after the return, so its server is closed when the stream has ended. A client that goes away
     * closes nothing: a tool it started (a paid call) runs to its end, and the server is then let go.
     */
    const answer = (request: Request, parsedBody: unknown, json: boolean) =>
      Effect.gen(function* () {
        const { server, transport } = yield* connected(json)
        const response = yield* Effect.tryPromise({
          try: () => transport.handleRequest(request, parsedBody === undefined ? {} : { parsedBody }),
          catch: (cause) => new TransportFailed({ cause })
        }).pipe(Effect.tapError(() => close(server)))
        const type = response.headers.get("content-type") ?? ""
        if (response.body === null || !type.startsWith("text/event-stream")) {
          yield* close(server)
          return { _tag: "Plain", response } satisfies McpAnswer
        }
        return { _tag: "Events", response, body: response.body, done: close(server) } satisfies McpAnswer
      }).pipe(Effect.withSpan("McpRequests.answer"))

    return { answer } as const
  }),
  dependencies: [McpProtocol.Default]
}) {}

/** An event stream's body, ending the request's server when it ends by itself (not when the client goes away). */
export const eventsOf = (answer: Extract<McpAnswer, { _tag: "Events" }>) =>
  Stream.concat(
    Stream.fromReadableStream({ evaluate: () => answer.body, onError: (error) => new TransportFailed({ cause: error }) }),
    Stream.execute(answer.done)
  )
