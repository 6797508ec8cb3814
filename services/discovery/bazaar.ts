// How an x402 discovery client calls one capability: `POST /api/v1/execute` with `{targetAgentId, capabilityId, input}`,
// the input described by the capability's inputSchema and the output by its outputSchema (the bazaar extension).
import { bodyDiscoveryExtension } from "../../layers/x402/bazaar.js"
import type { Capability } from "../../src/domain/Agent.js"

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> => typeof value === "object" && value !== null && !Array.isArray(value)

const exampleInput = (schema: unknown): Readonly<Record<string, unknown>> => {
  const value = exampleOf(schema)
  return isObject(value) ? value : {}
}

/**
 * A value that satisfies simple schemas (types, required properties, enum/const/default, string and array minimums),
 * for capabilities that declare no example: the extension's `info` must pass its own `schema`.
 */
export const exampleOf = (schema: unknown, depth = 0): unknown => {
  if (!isObject(schema) || depth > 8) return {}
  if ("const" in schema) return schema["const"]
  if ("default" in schema) return schema["default"]
  if (Array.isArray(schema["enum"]) && schema["enum"].length > 0) return schema["enum"][0]
  const type = Array.isArray(schema["type"]) ? schema["type"][0] : schema["type"]
  switch (type) {
    case "string":
      return "example".padEnd(typeof schema["minLength"] === "number" ? schema["minLength"] : 0, "e")
    case "integer":
    case "number":
      return typeof schema["minimum"] === "number" ? schema["minimum"] : 1
    case "boolean":
      return true
    case "null":
      return null
    case "array": {
      const min = typeof schema["minItems"] === "number" ? schema["minItems"] : 0
      return Array.from({ length: min }, () => exampleOf(schema["items"], depth + 1))
    }
    default: {
      const properties = isObject(schema["properties"]) ? schema["properties"] : {}
      const required = Array.isArray(schema["required"]) ? schema["required"].filter((k): k is string => typeof k === "string") : []
      return Object.fromEntries(required.map((k) => [k, exampleOf(properties[k], depth + 1)]))
    }
  }
}

/** The bazaar extension of one agent's capability. */
export const capabilityDiscovery = (agentId: string, capability: Pick<Capability, "id" | "inputSchema" | "outputSchema" | "examples">) => {
  const example = capability.examples?.[0]
  const inputSchema = isObject(capability.inputSchema) ? capability.inputSchema : { type: "object" }
  return bodyDiscoveryExtension({
    body: { targetAgentId: agentId, capabilityId: capability.id, input: isObject(example?.input) ? example.input : exampleInput(inputSchema) },
    bodySchema: {
      type: "object",
      properties: {
        targetAgentId: { type: "string", const: agentId },
        capabilityId: { type: "string", const: capability.id },
        input: inputSchema,
        idempotencyKey: { type: "string", minLength: 1, maxLength: 200 }
      },
      required: ["targetAgentId", "capabilityId", "input"]
    },
    ...(example?.output === undefined && capability.outputSchema === undefined
      ? {}
      : { output: { example: example?.output ?? exampleOf(capability.outputSchema), ...(isObject(capability.outputSchema) ? { schema: capability.outputSchema } : {}) } })
  })
}
