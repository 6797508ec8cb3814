// Everything checked before an execution is paid for: the agent, the capability, the input, the circuit, the callback URL.
import { Effect } from "effect"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { BadRequest, NotFound } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import { unstorableStrings } from "../../src/domain/Json.js"
import { Agents } from "../agents/Agents.js"
import { Circuits } from "../circuits/Circuits.js"
import { JsonSchemas } from "../agents/JsonSchemas.js"

export const prepare = Effect.gen(function* () {
  const agents = yield* Agents
  const schemas = yield* JsonSchemas
  const circuits = yield* Circuits
  const urlGuard = yield* UrlGuard
  return (req: ExecuteRequest) =>
    Effect.gen(function* () {
      const { agent } = yield* agents.get(req.targetAgentId).pipe(
        Effect.filterOrFail(
          ({ agent }) => agent.status === "active",
          () => new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${req.targetAgentId} not found or not active`, details: { agentId: req.targetAgentId } })
        )
      )
      const capability = agent.capabilities.find((c) => c.id === req.capabilityId)
      if (capability === undefined) {
        return yield* new NotFound({
          code: "CAPABILITY_NOT_FOUND",
          message: `the agent has no capability ${req.capabilityId}`,
          details: { capabilityId: req.capabilityId, available: agent.capabilities.map((c) => c.id) }
        })
      }
      const issues = [
        ...unstorableStrings(req.input, "input"),
        ...(capability.inputSchema === undefined ? [] : schemas.validate(capability.inputSchema, req.input, "input"))
      ]
      if (issues.length > 0) {
        return yield* new BadRequest({ code: "VALIDATION_ERROR", message: "input does not match the capability's inputSchema", details: { issues } })
      }
      yield* circuits.check(agent)
      const callbackUrl = req.callbackUrl ?? req.webhookUrl
      if (callbackUrl !== undefined) {
        yield* urlGuard.check(callbackUrl).pipe(
          Effect.mapError((rejected) =>
            new BadRequest({
              code: "VALIDATION_ERROR",
              message: "the callback URL is not allowed",
              details: { issues: [{ path: req.callbackUrl === undefined ? "webhookUrl" : "callbackUrl", message: rejected.reason }] }
            })
          )
        )
      }
      return { agent, capability, callbackUrl }
    })
})
