// JSON Schemas for MCP tools from our Effect Schemas: an object at the root (MCP requires it), definitions inlined under
// $defs, and none of Effect's internal `$id`s, which JSON Schema validators (the SDK client's ajv) would treat as URIs.
import { JSONSchema, Schema, SchemaAST } from "effect"

/** What MCP accepts as a tool's inputSchema or outputSchema. */
export interface ObjectSchema {
  readonly [key: string]: unknown
  readonly type: "object"
  readonly properties?: Record<string, object>
  readonly required?: Array<string>
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Effect marks some schemas with `$id: "/schemas/…"`; they are not meant as identifiers of a document. */
const withoutInternalIds = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(withoutInternalIds)
  if (!isRecord(value)) return value
  const out: Record<string, unknown> = {}
  for (const [key, inner] of Object.entries(value)) {
    if (key === "$id" && typeof inner === "string" && inner.startsWith("/schemas/")) continue
    out[key] = withoutInternalIds(inner)
  }
  return out
}

const isEmptyStruct = (ast: SchemaAST.AST) =>
  SchemaAST.isTypeLiteral(ast) && ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0

/** The schema of the wire (encoded) side of `schema`, as an MCP object schema. */
export const objectSchemaOf = <A, I>(schema: Schema.Schema<A, I>): ObjectSchema => {
  if (isEmptyStruct(schema.ast)) return { type: "object", properties: {}, additionalProperties: false }
  const definitions: Record<string, JSONSchema.JsonSchema7> = {}
  const root = withoutInternalIds(JSONSchema.fromAST(schema.ast, { definitions, topLevelReferenceStrategy: "skip" }))
  const defs = withoutInternalIds(definitions)
  const { properties, required, type: _, ...rest } = isRecord(root) ? root : {}
  return {
    ...rest,
    ...(isRecord(defs) && Object.keys(defs).length > 0 ? { $defs: defs } : {}),
    // A union of objects (e.g. a time series by metric) has no `type` of its own: every branch is an object.
    type: "object",
    ...(isRecord(properties) ? { properties: Object.fromEntries(Object.entries(properties).filter((e): e is [string, object] => isRecord(e[1]))) } : {}),
    ...(Array.isArray(required) ? { required: required.filter((r): r is string => typeof r === "string") } : {})
  }
}
