// MCP sessions in this process: each an SDK server on a Streamable HTTP transport, found by its Mcp-Session-Id. A session
// ends after MCP_SESSION_IDLE_SECONDS without a request (swept on the Effect clock), on DELETE, or at shutdown; at most
// MCP_MAX_SESSIONS at once. Stateless requests get a server and transport of their own, closed with the answer.
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { Clock, Data, Effect, Option, Queue } from "effect"
import { randomUUID } from "node:crypto"
import { McpConfig } from "../../layers/Config.js"
import { McpProtocol } from "./Protocol.js"

interface Session {
  readonly server: Server
  readonly transport: WebStandardStreamableHTTPServerTransport
  lastSeen: number
}

/** The SDK transport threw instead of answering (a bug on one side or the other). */
export class TransportFailed extends Data.TaggedError("TransportFailed")<{ readonly cause: unknown }> {}

export class McpSessions extends Effect.Service<McpSessions>()("mcp/McpSessions", {
  scoped: Effect.gen(function* () {
    const protocol = yield* McpProtocol
    const { maxSessions, sessionIdleSeconds } = yield* McpConfig
    const idleMs = sessionIdleSeconds * 1000
    const sessions = new Map<string, Session>()
    /** Sessions being initialised: they count against the limit before they have an id. */
    let opening = 0
    /** Tells the sweeper that a session exists again. */
    const added = yield* Queue.sliding<void>(1)

    const close = (server: Server) => Effect.promise(() => server.close().catch(() => undefined))

    const drop = (id: string, session: Session) =>
      Effect.suspend(() => {
        sessions.delete(id)
        return close(session.server)
      })

    /** Ends every session idle for MCP_SESSION_IDLE_SECONDS or more; how many ended. */
    const sweep = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const idle = [...sessions].filter(([, session]) => now - session.lastSeen >= idleMs)
      yield* Effect.forEach(idle, ([id, session]) => drop(id, session), { discard: true })
      return idle.length
    })

    /**
     * Sleeps until the earliest session could expire (never while there is none), so an idle server does not wake up and
     * a clock that jumps ahead (TestClock.setTime) costs one sweep, not one per interval.
     */
    const sweeper = Effect.gen(function* () {
      for (;;) {
        if (sessions.size === 0) {
          yield* Queue.take(added)
          continue
        }
        let earliest = Number.POSITIVE_INFINITY
        for (const session of sessions.values()) earliest = Math.min(earliest, session.lastSeen)
        const wait = earliest + idleMs - (yield* Clock.currentTimeMillis)
        if (wait > 0) yield* Effect.sleep(Math.max(wait, 1_000))
        else yield* sweep
      }
    })
    yield* Effect.forkScoped(sweeper)
    yield* Effect.addFinalizer(() => Effect.forEach([...sessions], ([id, session]) => drop(id, session), { discard: true }))

    const serve = (transport: WebStandardStreamableHTTPServerTransport, request: Request, parsedBody: unknown) =>
      Effect.tryPromise({
        try: () => transport.handleRequest(request, parsedBody === undefined ? {} : { parsedBody }),
        catch: (cause) => new TransportFailed({ cause })
      })

    /** The live session with this id, its idle time restarted; none when unknown or expired. */
    const find = (id: string) =>
      Effect.gen(function* () {
        const session = sessions.get(id)
        if (session === undefined) return Option.none<Session>()
        const now = yield* Clock.currentTimeMillis
        if (now - session.lastSeen >= idleMs) {
          yield* drop(id, session)
          return Option.none<Session>()
        }
        session.lastSeen = now
        return Option.some(session)
      })

    /** A request of an existing session (a DELETE ends it: the server's onclose forgets it). */
    const handle = (session: Session, request: Request, parsedBody: unknown) => serve(session.transport, request, parsedBody)

    /** A new session answering its initialize request; none when MCP_MAX_SESSIONS are open (after a sweep). */
    const open = (request: Request, parsedBody: unknown) =>
      Effect.gen(function* () {
        if (sessions.size + opening >= maxSessions) yield* sweep
        if (sessions.size + opening >= maxSessions) return Option.none<Response>()
        opening += 1
        const id = randomUUID()
        const server = protocol.make()
        const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => id })
        server.onclose = () => {
          sessions.delete(id)
        }
        const response = yield* Effect.promise(() => server.connect(transport)).pipe(
          Effect.zipRight(serve(transport, request, parsedBody)),
          Effect.tapErrorCause(() => close(server)),
          Effect.ensuring(Effect.sync(() => (opening -= 1)))
        )
        if (transport.sessionId === id) {
          sessions.set(id, { server, transport, lastSeen: yield* Clock.currentTimeMillis })
          yield* Queue.offer(added, undefined)
        } else {
          yield* close(server) // the initialize request was refused: no session came of it
        }
        return Option.some(response)
      }).pipe(Effect.withSpan("McpSessions.open"))

    /** A request outside any session, answered as JSON by a server of its own. */
    const stateless = (request: Request, parsedBody: unknown) =>
      Effect.acquireUseRelease(
        Effect.sync(() => ({ server: protocol.make(), transport: new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true }) })),
        ({ server, transport }) => Effect.promise(() => server.connect(transport)).pipe(Effect.zipRight(serve(transport, request, parsedBody))),
        ({ server }) => close(server)
      )

    return { find, handle, open, stateless } as const
  }),
  dependencies: [McpProtocol.Default]
}) {}
