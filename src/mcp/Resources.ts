// MCP resources: each active agent's capability (schemas, examples, price) by a URI template, listed page by page from
// discovery, and the API's error codes from the registry in src/domain/Errors.ts.
import {
  ErrorCode as RpcCode,
  McpError,
  type ListResourcesResult,
  type ListResourceTemplatesResult,
  type ReadResourceResult
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Option, Schema } from "effect"
import { Agents } from "../../services/agents/Agents.js"
import { Discovery } from "../../services/discovery/Discovery.js"
import { Capability } from "../domain/Agent.js"
import { DISCOVER_MAX_LIMIT, DISCOVER_MAX_OFFSET } from "../domain/Discovery.js"
import { ErrorCodes } from "../domain/Errors.js"
import { healthBandOf } from "../domain/Health.js"
import { AgentId } from "../domain/Ids.js"
import { EXECUTION_PLATFORM_FEE, formatUsdc } from "../domain/Money.js"
import { quoteOf } from "../domain/Pricing.js"

export const ERRORS_URI = "marketplace://errors"
export const CAPABILITY_TEMPLATE = "marketplace://agents/{agentId}/capabilities/{capabilityId}"
export const capabilityUri = (agentId: string, capabilityId: string) =>
  `marketplace://agents/${encodeURIComponent(agentId)}/capabilities/${encodeURIComponent(capabilityId)}`

/** MCP's code for an unknown resource (spec: server/resources, "Error Handling"). */
const RESOURCE_NOT_FOUND = -32002
const JSON_TYPE = "application/json"

const notFound = (uri: string) => new McpError(RESOURCE_NOT_FOUND, "resource not found", { uri })
const encodeCapability = Schema.encodeSync(Capability)
const decodeAgentId = Schema.decodeUnknownOption(AgentId)
const CAPABILITY_URI = /^marketplace:\/\/agents\/([^/]+)\/capabilities\/([^/]+)$/

const errorCatalogue = JSON.stringify({
  envelope: "{success:false, error:{code, message, details?}}; tool errors carry it as their text",
  errors: Object.entries(ErrorCodes).map(([code, { meaning, status }]) => ({ code, httpStatus: status, meaning }))
})

/** Uses the app's Discovery and Agents (provided by the app, as for the HTTP handlers). */
export class McpResources extends Effect.Service<McpResources>()("mcp/McpResources", {
  effect: Effect.gen(function* () {
    const discovery = yield* Discovery
    const agents = yield* Agents

    /** One page of agents (newest first) per cursor; their capabilities are the resources. Beyond 1,000 agents, use the template. */
    const list = (cursor: string | undefined): Effect.Effect<ListResourcesResult, McpError> =>
      Effect.gen(function* () {
        const offset = cursor === undefined ? 0 : Number(cursor)
        if (!Number.isInteger(offset) || offset < 0 || offset > DISCOVER_MAX_OFFSET) {
          return yield* Effect.fail(new McpError(RpcCode.InvalidParams, "invalid cursor"))
        }
        const page = yield* discovery.discover({ minHealth: 0, sort: "newest", limit: DISCOVER_MAX_LIMIT, offset }).pipe(
          Effect.mapError((e) => new McpError(RpcCode.InternalError, e.message))
        )
        const next = offset + DISCOVER_MAX_LIMIT
        const resources = page.agents.flatMap((agent) =>
          agent.capabilities.map((capability) => ({
            uri: capabilityUri(agent.id, capability.id),
            name: `${agent.name}: ${capability.name}`,
            description: `Capability ${capability.id} of agent ${agent.name} (${agent.id}): input and output JSON Schemas, examples, price ${capability.pricing.basePrice} ${capability.pricing.currency} per call plus the platform fee.`,
            mimeType: JSON_TYPE
          })))
        if (cursor === undefined) {
          resources.unshift({
            uri: ERRORS_URI,
            name: "Error codes",
            description: "Every error code of the API and its tools, with its HTTP status and meaning.",
            mimeType: JSON_TYPE
          })
        }
        return { resources, ...(page.pagination.hasMore && next <= DISCOVER_MAX_OFFSET ? { nextCursor: String(next) } : {}) }
      }).pipe(Effect.withSpan("Mcp.listResources"))

    const templates: ListResourceTemplatesResult = {
      resourceTemplates: [{
        uriTemplate: CAPABILITY_TEMPLATE,
        name: "Agent capability",
        description: "One capability of an active agent: what to send (inputSchema, examples), what comes back (outputSchema) and what a call costs.",
        mimeType: JSON_TYPE
      }]
    }

    const capability = (uri: string, rawAgentId: string, capabilityId: string) =>
      Effect.gen(function* () {
        const agentId = decodeAgentId(rawAgentId)
        if (Option.isNone(agentId)) return yield* Effect.fail(notFound(uri))
        const { agent } = yield* agents.get(agentId.value).pipe(Effect.mapError(() => notFound(uri)))
        const found = agent.capabilities.find((c) => c.id === capabilityId)
        if (agent.status !== "active" || found === undefined) return yield* Effect.fail(notFound(uri))
        const text = JSON.stringify({
          agent: { id: agent.id, name: agent.name, reputation_score: agent.reputationScore, health_score: agent.healthScore, health_band: healthBandOf(agent.healthScore), trustTier: agent.trustTier },
          capability: encodeCapability(found),
          cost: {
            // A metered capability: the most a call may cost (what its payment authorises; the unused part goes back).
            agentFee: formatUsdc(quoteOf(found).agentFee),
            platformFee: formatUsdc(EXECUTION_PLATFORM_FEE),
            total: formatUsdc(quoteOf(found).price)
          },
          execute: { method: "POST", path: "/api/v1/execute", body: { targetAgentId: agent.id, capabilityId: found.id, input: "an object matching capability.inputSchema" } }
        })
        return { contents: [{ uri, mimeType: JSON_TYPE, text }] }
      })

    const read = (uri: string): Effect.Effect<ReadResourceResult, McpError> => {
      if (uri === ERRORS_URI) return Effect.succeed({ contents: [{ uri, mimeType: JSON_TYPE, text: errorCatalogue }] })
      const match = CAPABILITY_URI.exec(uri)
      if (match === null) return Effect.fail(notFound(uri))
      const decoded = Effect.try(() => [decodeURIComponent(match[1] ?? ""), decodeURIComponent(match[2] ?? "")] as const)
      return decoded.pipe(
        Effect.mapError(() => notFound(uri)),
        Effect.flatMap(([agentId, capabilityId]) => capability(uri, agentId, capabilityId)),
        Effect.withSpan("Mcp.readResource")
      )
    }

    return { list, templates, read } as const
  })
}) {}
