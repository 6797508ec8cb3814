// The MCP protocol side: a new SDK `Server` per session (or per stateless request) whose tools/* and resources/*
// handlers run our Effects. The low-level `Server` is used because `McpServer` only takes zod schemas, and ours are
// Effect Schemas (one definition for validation and the JSON Schemas shown to clients).
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  ErrorCode as RpcCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Cause, Effect, Exit, Option, Runtime } from "effect"
import { McpResources } from "./Resources.js"
import { McpTools } from "./Tools.js"

export const SERVER_INFO = { name: "agent-marketplace", version: "0.1.0" } as const

const INSTRUCTIONS = [
  "Agent marketplace: AI agents offer priced capabilities; clients pay per call in USDC with x402.",
  "Find agents with search_agents (plain words), recommend_agent or discover_agents (filters); read one with get_agent or the capability resource (marketplace://agents/{agentId}/capabilities/{capabilityId}) before hiring it.",
  "Every tool is free except two paid with x402 v2 (called without payment they return isError with the x402 PaymentRequired; retry with the PaymentPayload in params._meta[\"x402/payment\"]): execute hires an agent (its capability price plus a 0.001 USDC platform fee) and register_agent registers one (0.10 USDC). check_chain_budget estimates chains of calls.",
  "Tool errors carry {success:false, error:{code, message, details}} with the API's codes (resource marketplace://errors)."
].join(" ")

/** An Effect's outcome as the SDK wants it: the value, or a thrown McpError (a defect is an internal error, logged). */
const settle = <A>(exit: Exit.Exit<A, McpError>, what: string): A => {
  if (Exit.isSuccess(exit)) return exit.value
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) throw failure.value
  throw new McpError(RpcCode.InternalError, `internal error in ${what}`)
}

export class McpProtocol extends Effect.Service<McpProtocol>()("mcp/McpProtocol", {
  effect: Effect.gen(function* () {
    const tools = yield* McpTools
    const resources = yield* McpResources
    const runtime = yield* Effect.runtime<never>()

    const run = async <A>(effect: Effect.Effect<A, McpError>, what: string, signal: AbortSignal): Promise<A> => {
      const exit = await Runtime.runPromiseExit(runtime)(
        effect.pipe(Effect.tapDefect((defect) => Effect.logError(`MCP ${what}: unhandled failure`, defect))),
        { signal }
      )
      return settle(exit, what)
    }

    /** A server for one session; the caller connects it to a transport and closes it. */
    const make = () => {
      const server = new Server(SERVER_INFO, {
        capabilities: { tools: { listChanged: false }, resources: { listChanged: false } },
        instructions: INSTRUCTIONS
      })
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools.listing] }))
      server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
        run(tools.call(request.params.name, request.params.arguments, { meta: request.params._meta ?? {} }), `tool ${request.params.name}`, extra.signal))
      server.setRequestHandler(ListResourcesRequestSchema, (request, extra) =>
        run(resources.list(request.params?.cursor), "resources/list", extra.signal))
      server.setRequestHandler(ListResourceTemplatesRequestSchema, () => resources.templates)
      server.setRequestHandler(ReadResourceRequestSchema, (request, extra) =>
        run(resources.read(request.params.uri), "resources/read", extra.signal))
      return server
    }
    return { make } as const
  }),
  dependencies: [McpTools.Default, McpResources.Default]
}) {}
