// JSON Schema handling for capability input/output schemas: meta-validation at registration, compiled validators cached by content.
import { Effect } from "effect"
import { createRequire } from "node:module"
import type { ErrorObject, ValidateFunction } from "ajv"
import { pointerToPath } from "../../src/domain/Json.js"

const require = createRequire(import.meta.url)
// ajv ships CommonJS; its ESM typings expose the class as the default export's `default`.
const Ajv2020: typeof import("ajv/dist/2020.js").default = require("ajv/dist/2020.js")
const draft7MetaSchema: object = require("ajv/dist/refs/json-schema-draft-07.json")

export interface SchemaIssue {
  readonly path: string
  readonly message: string
}

const formatErrors = (errors: ReadonlyArray<ErrorObject> | null | undefined, prefix: string): Array<SchemaIssue> =>
  (errors ?? []).slice(0, 20).map((e) => ({
    path: pointerToPath(prefix, e.instancePath),
    message: `${e.message ?? "is invalid"}${e.params && "allowedValues" in e.params ? ` (${String(e.params.allowedValues)})` : ""}`
  }))

const MAX_CACHED = 2_000

export class JsonSchemas extends Effect.Service<JsonSchemas>()("JsonSchemas", {
  sync: () => {
    // Dialect: JSON Schema 2020-12 by default; schemas declaring draft-07 are accepted too.
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
    ajv.addMetaSchema(draft7MetaSchema)
    const cache = new Map<string, ValidateFunction>()

    /** Issues that make `schema` unusable as a JSON Schema (meta-schema violations, unresolvable references). */
    const checkSchema = (schema: unknown, prefix: string): Array<SchemaIssue> => {
      if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
        return [{ path: prefix, message: "must be a JSON Schema object" }]
      }
      try {
        if (!ajv.validateSchema(schema)) return formatErrors(ajv.errors, prefix)
        validatorFor(schema)
        return []
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

    /** Validates `value`; returns the failing paths (empty when valid). */
    const validate = (schema: object, value: unknown, prefix: string): Array<SchemaIssue> => {
      const validator = validatorFor(schema)
      return validator(value) ? [] : formatErrors(validator.errors, prefix)
    }

    return { checkSchema, validate } as const
  }
}) {}
