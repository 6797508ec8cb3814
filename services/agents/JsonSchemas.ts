// JSON Schema handling for capability input/output schemas: meta-validation at registration, compiled validators cached by content, patterns on RE2.
import { Effect } from "effect"
import { createRequire } from "node:module"
import type { ErrorObject, ValidateFunction } from "ajv"
import { pointerToPath } from "../../src/domain/Json.js"
import { makePatternEngine } from "./patternEngine.js"

const require = createRequire(import.meta.url)
// ajv ships CommonJS; its ESM typings expose the class as the default export's `default`.
const Ajv2020: typeof import("ajv/dist/2020.js").default = require("ajv/dist/2020.js")
const draft7MetaSchema: object = require("ajv/dist/refs/json-schema-draft-07.json")

export interface SchemaIssue {
  readonly path: string
  readonly message: string
}

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
      message: why ?? `${e.message ?? "is invalid"}${e.params && "allowedValues" in e.params ? ` (${String(e.params.allowedValues)})` : ""}`
    }
  })

const MAX_CACHED = 2_000

export class JsonSchemas extends Effect.Service<JsonSchemas>()("JsonSchemas", {
  sync: () => {
    // Dialect: JSON Schema 2020-12 by default; schemas declaring draft-07 are accepted too. `pattern`s run on RE2 (linear
    // time): a backtracking pattern like ^(a+)+$ would otherwise let an unpaid 30-character input block the event loop.
    const patterns = makePatternEngine()
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false, code: { regExp: patterns.regExp } })
    ajv.addMetaSchema(draft7MetaSchema)
    const cache = new Map<string, ValidateFunction>()

    /** Issues that make `schema` unusable as a JSON Schema (meta-schema violations, unresolvable references). */
    const checkSchema = (schema: unknown, prefix: string): Array<SchemaIssue> => {
      if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
        return [{ path: prefix, message: "must be a JSON Schema object" }]
      }
      try {
        const { value: issues } = patterns.session(() => {
          if (!ajv.validateSchema(schema)) return formatErrors(ajv.errors, prefix)
          validatorFor(schema)
          return []
        })
        return issues
      } catch (error) {
        const message = error instanceof RangeError ? "is nested too deeply" : error instanceof Error ? error.message : String(error)
        return [{ path: prefix, message: message.slice(0, 300) }]
      }
    }

    /** The compiled validator, compiled once per distinct schema. */
    const validatorFor = (schema: object): ValidateFunction => {
      const key = JSON.stringify(schema)
      const hit = cache.get(key)
      if (hit !== undefined) return hit
      let compiled: ValidateFunction
      try {
        compiled = ajv.compile(schema)
      } finally {
        // Forget the schema's $id at once: agents must not see (or shadow) each other's schemas.
        ajv.removeSchema(schema)
      }
      if (cache.size >= MAX_CACHED) {
        const oldest = cache.keys().next()
        if (!oldest.done) cache.delete(oldest.value)
      }
      cache.set(key, compiled)
      return compiled
    }

    /**
     * Validates `value`; returns the failing paths (empty when valid). A string the pattern engine refused to check
     * (too long for its pattern, or the time budget spent) fails the validation: unchecked is never valid.
     */
    const validate = (schema: object, value: unknown, prefix: string): Array<SchemaIssue> => {
      let validator: ValidateFunction
      try {
        validator = validatorFor(schema)
      } catch (error) {
        // A schema stored before a limit existed (e.g. a lookahead pattern) can no longer be compiled.
        return [{ path: prefix, message: `cannot be checked: the schema is no longer supported (${error instanceof Error ? error.message.slice(0, 300) : String(error)})` }]
      }
      const { value: valid, refused } = patterns.session(() => validator(value))
      const issues = valid ? [] : formatErrors(validator.errors, prefix, refused)
      const reported = new Set(issues.map((i) => i.message))
      for (const why of refused.values()) if (!reported.has(why)) issues.push({ path: prefix, message: why })
      return issues
    }

    return { checkSchema, validate } as const
  }
}) {}
