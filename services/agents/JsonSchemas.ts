// JSON Schema handling for capability input/output schemas: bounds and meta-validation at registration, compiled
// validators cached by content (within a memory budget), each validation's cost estimated before it runs and its time
// bounded while it runs, patterns on RE2.
import { Config, Effect } from "effect"
import { createRequire } from "node:module"
import type { ErrorObject, ValidateFunction } from "ajv"
import { pointerToPath } from "../../src/domain/Json.js"
import { withinDeadline } from "./hardDeadline.js"
import { makePatternEngine } from "./patternEngine.js"
import { type CostProfile, SCHEMA_LIMITS, schemaBounds } from "./schemaBounds.js"
import { uniqueItemsKeyword } from "./uniqueItems.js"
import { isLightInput, MAX_VALIDATION_WORK, validationWork } from "./validationCost.js"

const require = createRequire(import.meta.url)
// ajv ships CommonJS; its ESM typings expose the class as the default export's `default`.
const Ajv2020: typeof import("ajv/dist/2020.js").default = require("ajv/dist/2020.js")
const draft7MetaSchema: object = require("ajv/dist/refs/json-schema-draft-07.json")

export interface SchemaIssue {
  readonly path: string
  readonly message: string
}

const clip = (message: string) => (message.length > 300 ? `${message.slice(0, 300)}…` : message)

/**
 * The longest one validation may run, whatever its estimate said (the estimate bounds the usual work; this bounds what
 * it misjudges, e.g. `enum`/`const` objects compared whole against a 60,000-key input). Above the pattern budget
 * (250 ms), so a pattern-heavy validation still reports which pattern it could not check.
 */
export const ValidationDeadlineMs = Config.integer("VALIDATION_DEADLINE_MS").pipe(
  Config.withDefault(500),
  Config.validate({ message: "VALIDATION_DEADLINE_MS must be between 10 and 10000", validation: (n) => n >= 10 && n <= 10_000 })
)

/** ajv's errors as issues; a `pattern` error for a string the engine refused to check says why instead. */
const formatErrors = (
  errors: ReadonlyArray<ErrorObject> | null | undefined,
  prefix: string,
  refused: ReadonlyMap<string, string> = new Map()
): Array<SchemaIssue> =>
  (errors ?? []).slice(0, 20).map((e) => {
    const pattern: unknown = e.keyword === "pattern" ? e.params["pattern"] : undefined
    const why = typeof pattern === "string" ? refused.get(pattern) : undefined
    return {
      path: pointerToPath(prefix, e.instancePath),
      message: why ?? clip(`${e.message ?? "is invalid"}${e.params && "allowedValues" in e.params ? ` (${String(e.params.allowedValues)})` : ""}`)
    }
  })

/** Compiled validators kept, by the JSON values of their schemas (both validators: ~0.9 KB of heap per value): ~45 MB at most. */
const MAX_CACHED_NODES = 50_000

/** Inputs estimated at most this much work get every failure reported (at most ~this many error objects); larger ones the first. */
const REPORT_ALL_WORK = 20_000

interface Compiled {
  readonly schema: object
  /** Stops at the first failure. */
  readonly validator: ValidateFunction
  /** Reports every failure; compiled when first needed. */
  all: ValidateFunction | undefined
  readonly profile: CostProfile
  readonly nodes: number
}

export class JsonSchemas extends Effect.Service<JsonSchemas>()("JsonSchemas", {
  effect: Effect.gen(function* () {
    const deadlineMs = yield* ValidationDeadlineMs
    // Dialect: JSON Schema 2020-12 by default; schemas declaring draft-07 are accepted too. `pattern`s run on RE2 (linear
    // time): a backtracking pattern like ^(a+)+$ would otherwise let an unpaid 30-character input block the event loop.
    const patterns = makePatternEngine()
    // Compile cost: ajv's code optimizer is super-linear, and inlined $refs copy their target's code at every use (200
    // uses of a 20-property definition: 1 s); without both, compiling is linear in the schema (docs/decisions/hostile-input.md).
    const makeAjv = (allErrors: boolean) => {
      const instance = new Ajv2020({ strict: false, allErrors, validateFormats: false, inlineRefs: false, code: { regExp: patterns.regExp, optimize: false } })
      instance.removeKeyword("uniqueItems")
      instance.addKeyword(uniqueItemsKeyword)
      instance.addMetaSchema(draft7MetaSchema)
      return instance
    }
    // A schema's problems are all reported (it is small: SCHEMA_LIMITS), and a small input's; a larger input's validation
    // stops at its first failure, because with allErrors one input raises an error per failing (rule, value) pair: 7,000
    // items failing 64 branches made ~900,000 error objects, which pushed the process to its heap cap.
    const ajv = makeAjv(true)
    const inputs = makeAjv(false)
    const cache = new Map<string, Compiled>()
    let cachedNodes = 0

    /** A fresh validator for a schema within SCHEMA_LIMITS; its $id is forgotten at once (agents must not shadow each other's). */
    const compile = (schema: object, instance = inputs): ValidateFunction => {
      try {
        return instance.compile(schema)
      } finally {
        instance.removeSchema(schema)
      }
    }

    /** Issues that make `schema` unusable: over the limits, meta-schema violations, unresolvable references, unsupported patterns. */
    const checkOne = (schema: unknown, prefix: string): { readonly issues: Array<SchemaIssue>; readonly nodes: number } => {
      if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
        return { issues: [{ path: prefix, message: "must be a JSON Schema object" }], nodes: 0 }
      }
      const bounds = schemaBounds(schema, prefix)
      if (bounds._tag === "Refused") return { issues: [...bounds.issues], nodes: 0 }
      try {
        const { value: issues } = patterns.session(() => {
          if (!ajv.validateSchema(schema)) return formatErrors(ajv.errors, prefix)
          compile(schema) // not cached: registration is unpaid, the cache is for paid agents' schemas
          return []
        })
        return { issues, nodes: bounds.nodes }
      } catch (error) {
        const message = error instanceof RangeError ? "is nested too deeply" : error instanceof Error ? error.message : String(error)
        return { issues: [{ path: prefix, message: message.slice(0, 300) }], nodes: bounds.nodes }
      }
    }

    const checkSchema = (schema: unknown, prefix: string): Array<SchemaIssue> => checkOne(schema, prefix).issues

    /**
     * The schemas of one registration or update: each checked as by checkSchema, all together within
     * SCHEMA_LIMITS.requestNodes (checking stops there, so a refused request costs about one pass over its JSON).
     */
    const checkSchemas = (entries: ReadonlyArray<{ readonly schema: unknown; readonly path: string }>): Array<SchemaIssue> => {
      const issues: Array<SchemaIssue> = []
      let total = 0
      for (const { path, schema } of entries) {
        const checked = checkOne(schema, path)
        issues.push(...checked.issues)
        total += checked.nodes
        if (total > SCHEMA_LIMITS.requestNodes) {
          issues.push({ path, message: `the schemas of one request may have at most ${SCHEMA_LIMITS.requestNodes} JSON values together` })
          break
        }
      }
      return issues
    }

    /** The compiled validator and cost profile, once per distinct schema; a schema stored before a limit existed is refused. */
    const compiledFor = (schema: object, prefix: string): Compiled | Array<SchemaIssue> => {
      const key = JSON.stringify(schema)
      const hit = cache.get(key)
      if (hit !== undefined) {
        cache.delete(key)
        cache.set(key, hit) // most recently used last
        return hit
      }
      const bounds = schemaBounds(schema, "schema")
      if (bounds._tag === "Refused") {
        return bounds.issues.map((i) => ({ path: prefix, message: `cannot be checked: the schema is no longer supported (${i.path} ${i.message})` }))
      }
      const entry: Compiled = { schema, validator: compile(schema), all: undefined, profile: bounds.profile, nodes: bounds.nodes }
      cache.set(key, entry)
      cachedNodes += entry.nodes
      for (const [oldKey, old] of cache) {
        if (cachedNodes <= MAX_CACHED_NODES) break
        cache.delete(oldKey)
        cachedNodes -= old.nodes
      }
      return entry
    }

    /**
     * Validates `value`; returns the failing paths (empty when valid). A value whose estimated work exceeds
     * MAX_VALIDATION_WORK, a validation still running after `deadlineMs` (terminated where it is), and a string the
     * pattern engine refused to check (too long for its pattern, or the time budget spent) fail the validation: unchecked
     * is never valid.
     */
    const validate = (schema: object, value: unknown, prefix: string): Array<SchemaIssue> => {
      let compiled: Compiled | Array<SchemaIssue>
      try {
        compiled = compiledFor(schema, prefix)
      } catch (error) {
        // A schema stored before a limit existed (e.g. a lookahead pattern) can no longer be compiled.
        return [{ path: prefix, message: `cannot be checked: the schema is no longer supported (${error instanceof Error ? error.message.slice(0, 300) : String(error)})` }]
      }
      if (Array.isArray(compiled)) return compiled
      const work = validationWork(compiled.profile, value)
      if (work > MAX_VALIDATION_WORK) {
        return [{
          path: prefix,
          message: `is too large to be checked against this schema: its values times the schema's rules exceed ${MAX_VALIDATION_WORK} (send fewer values, or shorter strings)`
        }]
      }
      const validator = work <= REPORT_ALL_WORK ? (compiled.all ??= compile(compiled.schema, ajv)) : compiled.validator
      const { value: bounded, refused } = patterns.session(() =>
        isLightInput(value) ? { _tag: "Done", value: validator(value) } as const : withinDeadline(deadlineMs, () => validator(value)))
      if (bounded._tag === "Overrun") {
        patterns.recover()
        return [{
          path: prefix,
          message: `could not be checked against this schema within ${deadlineMs} ms (its rules are too costly for this input: send a smaller one)`
        }]
      }
      const valid = bounded.value
      const issues = valid ? [] : formatErrors(validator.errors, prefix, refused)
      const reported = new Set(issues.map((i) => i.message))
      for (const why of refused.values()) if (!reported.has(why)) issues.push({ path: prefix, message: why })
      return issues
    }

    return { checkSchema, checkSchemas, validate } as const
  })
}) {}
