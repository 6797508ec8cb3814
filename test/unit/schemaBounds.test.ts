// Issue 24: what a caller's JSON Schema may cost before payment (structural limits checked before ajv) and what one
// validation may cost (the schema's cost profile times the input, a linear uniqueItems).
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { JsonSchemas } from "../../services/agents/JsonSchemas.js"
import { SCHEMA_LIMITS, schemaBounds } from "../../services/agents/schemaBounds.js"
import { firstDuplicate } from "../../services/agents/uniqueItems.js"
import { MAX_VALIDATION_WORK, validationWork } from "../../services/agents/validationCost.js"

const schemas = Effect.runSync(Effect.provide(JsonSchemas, JsonSchemas.Default))

const wide = (n: number) => ({ type: "object", properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`property_number_${i}`, { type: "string", maxLength: 10 }])) })
const deep = (n: number) => {
  let s: object = { type: "string" }
  for (let i = 1; i < n; i++) s = { type: "object", properties: { a: s } }
  return s
}
/** d0 → allOf [d1, d1] → ... : 2^levels evaluations of one input value, in a few hundred bytes. */
const doubling = (levels: number) => {
  const $defs: Record<string, unknown> = { [`d${levels}`]: { type: "string" } }
  for (let i = 0; i < levels; i++) $defs[`d${i}`] = { allOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] }
  return { $defs, $ref: "#/$defs/d0" }
}
const messages = (schema: unknown) => schemas.checkSchema(schema, "inputSchema").map((i) => `${i.path}: ${i.message}`)
const timed = <A>(f: () => A) => {
  const started = performance.now()
  const value = f()
  return { value, ms: performance.now() - started }
}

describe("schema limits at registration", () => {
  it("the 20,000-property schema (~1 MB) is refused by its size before ajv compiles anything", () => {
    const { ms, value } = timed(() => messages(wide(20_000)))
    expect(value).toEqual([expect.stringMatching(/^inputSchema: is \d+ characters of JSON; a schema may have at most 32768$/)])
    // Compiling it took seconds and ~1 GB on the old code; refusing it is one JSON.stringify.
    expect(ms).toBeLessThan(500)
  })

  const refused: ReadonlyArray<readonly [string, unknown, RegExp]> = [
    ["201 properties", wide(201), /^inputSchema\.properties: has 201 members; an object in a schema may have at most 200$/],
    ["25 levels of nesting", deep(13), /nests deeper than 24 levels/],
    ["an enum of 501 values", { enum: Array.from({ length: 501 }, (_, i) => i) }, /^inputSchema\.enum: has 501 items/],
    ["65 anyOf branches", { anyOf: Array.from({ length: 65 }, () => ({ type: "string" })) }, /^inputSchema\.anyOf: has 65 subschemas; anyOf may have at most 64$/],
    ["65 oneOf branches", { oneOf: Array.from({ length: 65 }, (_, i) => ({ const: i })) }, /oneOf may have at most 64/],
    ["more than 2,000 JSON values", { allOf: Array.from({ length: 60 }, () => ({ enum: Array.from({ length: 40 }, (_, i) => i) })) }, /more than 2000 JSON values/],
    ["a remote $ref", { $ref: "https://schemas.example/s.json" }, /^inputSchema\.\$ref: \$ref "https:\/\/schemas\.example\/s\.json" is not supported: only references inside the schema/],
    ["a $ref cycle", { $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } } } }, $ref: "#/$defs/node" }, /has a \$ref cycle/],
    ["a $ref to itself", { $ref: "#" }, /has a \$ref cycle/],
    ["$dynamicRef", { $dynamicRef: "#meta" }, /\$dynamicRef is not supported/],
    ["a $ref that resolves nowhere", { $ref: "#/$defs/missing" }, /does not resolve inside the schema/],
    ["an $id below the root", { type: "object", properties: { a: { $id: "https://x.example/a", type: "string" } } }, /\$id is supported only at the schema's root/],
    ["refs doubling 30 times (2^30 checks of one value)", doubling(30), /stands for \d+ JSON values once its \$refs are expanded; a schema may stand for at most 10000$/]
  ]
  for (const [what, schema, message] of refused) {
    it(`refuses ${what}, before compiling`, () => {
      const { ms, value } = timed(() => messages(schema))
      expect(value).toEqual([expect.stringMatching(message)])
      expect(ms).toBeLessThan(500)
    })
  }

  it("accepts ordinary schemas: the limits' edges, shared definitions, draft-07, uniqueItems on objects", () => {
    expect(messages(wide(200))).toEqual([])
    expect(messages(deep(12))).toEqual([])
    expect(messages({ enum: Array.from({ length: 500 }, (_, i) => `c${i}`) })).toEqual([])
    expect(messages({ anyOf: Array.from({ length: 64 }, (_, i) => ({ const: i })) })).toEqual([])
    expect(messages(doubling(8))).toEqual([])
    expect(messages({
      $schema: "http://json-schema.org/draft-07/schema#",
      definitions: { point: { type: "object", properties: { x: { type: "number" }, y: { type: "number" } }, required: ["x", "y"] } },
      type: "object",
      properties: { from: { $ref: "#/definitions/point" }, to: { $ref: "#/definitions/point" }, tags: { type: "array", items: { type: "object" }, uniqueItems: true } }
    })).toEqual([])
  })

  it("all the schemas of one request share a budget of JSON values; the check stops at it", () => {
    const schema = wide(190) // ~570 values
    const entries = Array.from({ length: 20 }, (_, i) => ({ schema, path: `capabilities.${i}.inputSchema` }))
    const issues = schemas.checkSchemas(entries)
    expect(issues).toHaveLength(1)
    expect(issues[0]?.message).toBe(`the schemas of one request may have at most ${SCHEMA_LIMITS.requestNodes} JSON values together`)
    expect(Number(issues[0]?.path.split(".")[1])).toBeLessThan(10)
    expect(schemas.checkSchemas(entries.slice(0, 8))).toEqual([])
  })
})

describe("cost profile and validation work", () => {
  it("counts the schema values applying at each instance depth, $refs expanded", () => {
    const bounds = schemaBounds({
      $defs: { s: { type: "string" } },
      type: "object",
      properties: { a: { $ref: "#/$defs/s" }, b: { type: "array", items: { $ref: "#/$defs/s" }, uniqueItems: true } }
    }, "x")
    expect(bounds).toMatchObject({ _tag: "Bounded", profile: { byDepth: [3, 6, 3], uniqueItems: 1 } })
  })

  it("is linear in the input, stops past the limit, and does not walk what no rule reads", () => {
    const bounds = schemaBounds({ type: "object", properties: { list: { type: "array", items: { type: "number" } } } }, "x")
    if (bounds._tag !== "Bounded") throw new Error("bounded")
    const list = (n: number) => ({ list: Array.from({ length: n }, (_, i) => i) })
    expect(validationWork(bounds.profile, list(1_000))).toBe(2 + 2 * 2 + 2 * 1_000) // root; the "list" member (value and key); each item
    expect(validationWork(bounds.profile, list(200_000), 10_000)).toBeLessThan(10_100)
    // Below the deepest rule nothing is checked: a deep free-form value costs one unit.
    const free = schemaBounds({ type: "object" }, "x")
    if (free._tag !== "Bounded") throw new Error("bounded")
    expect(validationWork(free.profile, { a: { b: { c: Array.from({ length: 10_000 }, () => ({})) } } })).toBe(2)
  })

  it("refuses an input whose values times the schema's rules exceed the budget, before ajv runs", () => {
    const heavy = { type: "array", items: { allOf: Array.from({ length: 64 }, (_, i) => ({ type: "object", properties: { a: { type: "number", minimum: i } }, required: ["a"] })) } }
    const { ms, value } = timed(() => schemas.validate(heavy, Array.from({ length: 20_000 }, (_, i) => ({ a: i })), "input"))
    expect(value).toEqual([{ path: "input", message: expect.stringContaining(`exceed ${MAX_VALIDATION_WORK}`) }])
    expect(ms).toBeLessThan(500)
    expect(schemas.validate(heavy, Array.from({ length: 100 }, (_, i) => ({ a: i + 64 })), "input")).toEqual([])
  })

  it("a schema stored before the limits (now refused) is never compiled: its inputs are refused, saying why", () => {
    const { ms, value } = timed(() => schemas.validate(wide(20_000), { property_number_0: "x" }, "input"))
    expect(value).toEqual([{ path: "input", message: expect.stringMatching(/^cannot be checked: the schema is no longer supported \(schema is \d+ characters of JSON/) }])
    expect(ms).toBeLessThan(500)
  })
})

describe("uniqueItems in linear time", () => {
  it("compares items as JSON Schema does: key order does not matter, types do", () => {
    expect(firstDuplicate([{ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }])).toEqual([0, 1])
    expect(firstDuplicate([1, "1", true, "true", null, "null", [1], { 0: 1 }])).toBeUndefined()
    expect(firstDuplicate([[1, 2], [2, 1]])).toBeUndefined()
    expect(firstDuplicate(["a", "b", "a"])).toEqual([0, 2])
  })

  it("20,000 object items (the issue's 149 KB attack, 5.2 s on ajv's pairwise check) are checked in well under a second", () => {
    const schema = { type: "object", properties: { list: { type: "array", uniqueItems: true } } }
    const items = Array.from({ length: 20_000 }, (_, i) => ({ id: i, tag: "x" }))
    // The duplicate pair is the last one a pairwise check from the end would reach.
    const { ms, value } = timed(() => schemas.validate(schema, { list: [{ tag: "x", id: 0 }, ...items] }, "input"))
    expect(value).toEqual([{ path: "input.list", message: "must NOT have duplicate items (items ## 0 and 1 are identical)" }])
    expect(ms).toBeLessThan(1_000)
    expect(schemas.validate(schema, { list: items }, "input")).toEqual([])
  })
})
