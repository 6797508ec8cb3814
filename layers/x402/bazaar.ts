// The x402 v2 `bazaar` discovery extension (coinbase/x402 extensions/bazaar): how to call a paid resource, as `info`
// (the values) and `schema` (a JSON Schema that `info` satisfies), in the shape its `declareDiscoveryExtension` makes
// for a JSON body method. x402 discovery clients and facilitators catalogue a resource from it.

export const BAZAAR = "bazaar"

export interface BodyDiscovery {
  /** An example body (values), e.g. the first of a capability's examples. */
  readonly body: Readonly<Record<string, unknown>>
  /** JSON Schema of the body. */
  readonly bodySchema: Readonly<Record<string, unknown>>
  readonly output?: { readonly example?: unknown; readonly schema?: Readonly<Record<string, unknown>> }
}

/** The extension for a `POST` resource with a JSON body. */
export const bodyDiscoveryExtension = (d: BodyDiscovery) => {
  const withOutput = d.output?.example !== undefined
  return {
    info: {
      input: { type: "http", method: "POST", bodyType: "json", body: d.body },
      ...(withOutput ? { output: { type: "json", example: d.output?.example } } : {})
    },
    schema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: {
        input: {
          type: "object",
          properties: {
            type: { type: "string", const: "http" },
            method: { type: "string", enum: ["POST"] },
            bodyType: { type: "string", enum: ["json"] },
            body: d.bodySchema
          },
          required: ["type", "method", "bodyType", "body"],
          additionalProperties: false
        },
        ...(withOutput
          ? { output: { type: "object", properties: { type: { type: "string" }, example: { type: "object", ...(d.output?.schema ?? {}) } }, required: ["type"] } }
          : {})
      },
      required: ["input"]
    }
  } as const
}
