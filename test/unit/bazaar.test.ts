// The bazaar discovery extension of a capability (services/discovery/bazaar.ts): its `info` always passes its own
// `schema` (what the x402 bazaar's facilitator checks), from the capability's example or one made from its schemas.
import { createRequire } from "node:module"
import { describe, expect, it } from "vitest"
import { capabilityDiscovery, exampleOf } from "../../services/discovery/bazaar.js"

const require = createRequire(import.meta.url)
const Ajv2020: typeof import("ajv/dist/2020.js").default = require("ajv/dist/2020.js")
const passes = (extension: { readonly info: unknown; readonly schema: unknown }) => {
  const validate = new Ajv2020({ strict: false, allErrors: true }).compile(extension.schema as object)
  return validate(extension.info) ? [] : validate.errors
}

const AGENT = "0b6a3e0c-5d2c-4c55-a0f3-8a4c6f0a1b2c"
const inputSchema = {
  type: "object",
  required: ["text", "lang", "n", "flags", "opts"],
  properties: {
    text: { type: "string", minLength: 12 },
    lang: { type: "string", enum: ["fr", "de"] },
    n: { type: "integer", minimum: 3 },
    flags: { type: "array", minItems: 2, items: { type: "boolean" } },
    opts: { type: "object", required: ["mode"], properties: { mode: { const: "fast" } } },
    optional: { type: "string" }
  }
}

describe("bazaar extension of a capability", () => {
  it("without an example, one made from the schemas passes the extension's own schema", () => {
    expect(exampleOf(inputSchema)).toEqual({ text: "exampleeeeee", lang: "fr", n: 3, flags: [true, true], opts: { mode: "fast" } })
    const extension = capabilityDiscovery(AGENT, { id: "translate", inputSchema, outputSchema: { type: "object", required: ["out"], properties: { out: { type: "string" } } } })
    expect(passes(extension)).toEqual([])
    expect(extension.info).toMatchObject({ input: { method: "POST", bodyType: "json", body: { targetAgentId: AGENT, capabilityId: "translate" } }, output: { example: { out: "example" } } })
  })

  it("the capability's first example is the body, and a body that breaks the input schema would fail", () => {
    const extension = capabilityDiscovery(AGENT, {
      id: "translate",
      inputSchema,
      examples: [{ input: { text: "hello there!", lang: "de", n: 4, flags: [false, true], opts: { mode: "fast" } }, output: { out: "hallo" } }]
    })
    expect(extension.info.input.body).toMatchObject({ input: { text: "hello there!", lang: "de" } })
    expect(passes(extension)).toEqual([])
    expect(passes({ ...extension, info: { ...extension.info, input: { ...extension.info.input, body: { targetAgentId: AGENT, capabilityId: "translate", input: { text: "short" } } } } })).not.toEqual([])
    expect(passes({ ...extension, info: { ...extension.info, input: { ...extension.info.input, body: { ...extension.info.input.body, capabilityId: "other" } } } })).not.toEqual([])
  })
})
