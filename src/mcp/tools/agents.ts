// The MCP tool for one agent's full record (free), answered by the Agents service behind GET /api/v1/agents/:id.
import { Effect, Schema } from "effect"
import { Agents } from "../../../services/agents/Agents.js"
import { toResource } from "../../../services/agents/View.js"
import { AgentResource } from "../../domain/Agent.js"
import { AgentId } from "../../domain/Ids.js"
import { defineTool } from "../Tool.js"

export const agentTools = Effect.gen(function* () {
  const agents = yield* Agents
  return [
    defineTool({
      name: "get_agent",
      title: "Get an agent",
      description:
        "One agent's full record by id: capabilities with input/output JSON Schemas, examples and prices, endpoints, reputation, health, circuit state, trust tier, settlement policy and chain settings. Use it before hiring an agent to build a valid input. Inactive and suspended agents are shown with their status; unknown ids give AGENT_NOT_FOUND. Free.",
      input: Schema.Struct({ agentId: AgentId.annotations({ description: "The agent's id (a UUID)" }) }),
      output: Schema.Struct({
        agent: AgentResource,
        meta: Schema.Struct({ cached: Schema.Boolean, cacheSource: Schema.String })
      }),
      run: ({ agentId }) => Effect.map(agents.get(agentId), ({ agent, meta }) => ({ agent: toResource(agent), meta }))
    })
  ]
})
