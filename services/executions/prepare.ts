// Everything checked before an execution is paid for: the agent, the capability, the input, the circuit, the callback URL
// (its form; its host is looked up only once the payment is verified).
import { Effect } from "effect"
import { UrlGuard, type UrlRejected } from "../../layers/UrlGuard.js"
import { BadRequest, NotFound } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import { unstorableStrings } from "../../src/domain/Json.js"
import { Agents } from "../agents/Agents.js"
import { Circuits } from "../circuits/Circuits.js"
import { JsonSchemas } from "../agents/JsonSchemas.js"

const callbackRefused = (req: ExecuteRequest) => (rejected: UrlRejected) =>
  new BadRequest({
    code: "VALIDATION_ERROR",
    message: "the callback URL is not allowed",
    details: { issues: [{ path: req.callbackUrl === undefined ? "webhookUrl" : "callbackUrl", message: rejected.reason }] }
  })

/** The callback URL's host against the URL policy (a lookup): run once the payment is verified, before anything is reserved. */
export const lookUpCallback = Effect.map(UrlGuard, (urlGuard) => (req: ExecuteRequest, callbackUrl: string) =>
  urlGuard.check(callbackUrl).pipe(Effect.mapError(callbackRefused(req))))

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
      // Its form only: the host's lookup waits for the payment (`lookUpCallback`).
      if (callbackUrl !== undefined) yield* urlGuard.screen(callbackUrl).pipe(Effect.mapError(callbackRefused(req)))
      return { agent, capability, callbackUrl }
    })
})
