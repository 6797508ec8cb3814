import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { JsonSchemas } from "../../services/agents/JsonSchemas.js"
import { MAX_PATTERN_SIZE, MAX_PATTERN_WORK, patternSize } from "../../services/agents/patternEngine.js"

const schemas = Effect.runSync(Effect.provide(JsonSchemas, JsonSchemas.Default))
const textWith = (pattern: string) => ({ type: "object", properties: { text: { type: "string", pattern } } })

describe("schema patterns run in linear time (RE2)", () => {
  it("the catastrophic ^(a+)+$ answers a 30-character near miss at once, and 3,000 characters too", () => {
    const schema = textWith("^(a+)+$")
    expect(schemas.checkSchema(schema, "inputSchema")).toEqual([])
    // A backtracking engine needs ~2^30 steps for this input; a linear one, microseconds.
    const started = performance.now()
    expect(schemas.validate(schema, { text: `${"a".repeat(30)}!` }, "input")).toEqual([
      { path: "input.text", message: 'must match pattern "^(a+)+$"' }
    ])
    expect(schemas.validate(schema, { text: "a".repeat(3_000) }, "input")).toEqual([])
    expect(schemas.validate(schema, { text: `${"a".repeat(3_000)}!` }, "input")).toHaveLength(1)
    expect(performance.now() - started).toBeLessThan(1_000)
  })

  it("ordinary patterns keep their meaning: anchors, classes, unicode, patternProperties", () => {
    const schema = {
      type: "object",
      properties: { code: { type: "string", pattern: "^[A-Z]{3}-\\d{2,4}$" }, word: { type: "string", pattern: "^\\p{L}+$" } },
      patternProperties: { "^x-": { type: "number" } }
    }
    expect(schemas.validate(schema, { code: "ABC-123", word: "héllo", "x-n": 1 }, "input")).toEqual([])
    expect(schemas.validate(schema, { code: "abc-123", word: "h3llo", "x-n": "1" }, "input").map((i) => i.path).sort()).toEqual([
      "input.code",
      "input.word",
      "input.x-n"
    ])
  })

  it("patterns RE2 cannot run (lookahead, lookbehind, backreferences) are refused at registration with the reason", () => {
    for (const pattern of ["(?=a)b", "(?<=a)b", "(a)\\1", "(?!x)."]) {
      const issues = schemas.checkSchema(textWith(pattern), "inputSchema")
      expect(issues, pattern).toHaveLength(1)
      expect(issues[0]?.message).toMatch(/not supported: patterns run on RE2/)
    }
    const inProperties = schemas.checkSchema({ type: "object", patternProperties: { "(?=a)": {} } }, "inputSchema")
    expect(inProperties[0]?.message).toMatch(/not supported/)
  })

  it("patterns that expand past the size limit are refused at registration", () => {
    expect(patternSize("a{1000}{1000}")).toBeGreaterThan(MAX_PATTERN_SIZE)
    expect(schemas.checkSchema(textWith("(a{100}){100}"), "inputSchema")[0]?.message).toMatch(/too large/)
    expect(schemas.checkSchema(textWith("x".repeat(1_001)), "inputSchema")[0]?.message).toMatch(/longer than 1000/)
    expect(patternSize("^[a-z]+$")).toBeLessThan(10)
  })

  it("a string too long for its pattern's work limit is not checked and so not valid", () => {
    const pattern = "^(ab|cd|ef|gh){1,20}$"
    const size = patternSize(pattern)
    const tooLong = "ab".repeat(Math.ceil(MAX_PATTERN_WORK / size / 2) + 1)
    const issues = schemas.validate(textWith(pattern), { text: tooLong }, "input")
    expect(issues).toHaveLength(1)
    expect(issues[0]?.message).toMatch(/too long to be checked/)
  })

  it("thousands of validations reuse compiled patterns without exhausting RE2's memory", () => {
    const patterns = Array.from({ length: 40 }, (_, i) => `^(item${i}|[a-z]{1,8})\\d*$`)
    for (let round = 0; round < 10; round++) {
      for (const pattern of patterns) expect(schemas.validate(textWith(pattern), { text: `abc${round}` }, "input")).toEqual([])
    }
  })
})
