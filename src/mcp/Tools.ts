// The MCP tool registry: every tool by name, built once from the services the HTTP API uses.
import { ErrorCode as RpcCode, McpError, type CallToolResult, type Tool as ToolListing } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import type { Tool, ToolCall } from "./Tool.js"
import { agentTools } from "./tools/agents.js"
import { analyticsTools } from "./tools/analytics.js"
import { chainTools } from "./tools/chains.js"
import { discoveryTools } from "./tools/discovery.js"
import { executionTools } from "./tools/executions.js"
import { paidTools } from "./tools/paid.js"
import { reputationTools } from "./tools/reputation.js"

/** Uses the app's domain services (provided by the app, as for the HTTP handlers), so nothing is built twice. */
export class McpTools extends Effect.Service<McpTools>()("mcp/McpTools", {
  effect: Effect.gen(function* () {
    const groups = [discoveryTools, agentTools, executionTools, chainTools, reputationTools, analyticsTools, paidTools]
    const all: ReadonlyArray<Tool> = (yield* Effect.all(groups)).flat()
    const byName = new Map(all.map((tool) => [tool.name, tool] as const))
    if (byName.size !== all.length) return yield* Effect.dieMessage("two MCP tools share a name")
    const listing: ReadonlyArray<ToolListing> = all.map((tool) => tool.listing)

    /** An unknown tool is a protocol error (JSON-RPC -32602), like bad arguments; a tool's own failure is a result. */
    const call = (name: string, args: unknown, context: ToolCall): Effect.Effect<CallToolResult, McpError> => {
      const tool = byName.get(name)
      return tool === undefined
        ? Effect.fail(new McpError(RpcCode.InvalidParams, `unknown tool ${JSON.stringify(name.slice(0, 100))}; tools/list names them`))
        : tool.invoke(args, context)
    }
    return { listing, call } as const
  })
}) {}
