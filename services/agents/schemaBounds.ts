// Structural limits on a caller's JSON Schema, checked on the raw JSON before ajv ever sees it, and the schema's cost
// profile: how many schema values apply at each instance depth once every $ref is replaced by its target.
import type { SchemaIssue } from "./JsonSchemas.js"

/**
 * What one capability schema may be. Compiling costs ajv ~0.02-0.05 ms per JSON value with our options (and memory in
 * proportion), so these keep the worst accepted registration to tens of milliseconds; see docs/decisions/hostile-input.md.
 */
export const SCHEMA_LIMITS = {
  /** JSON text of one schema, in characters. */
  bytes: 32_768,
  /** JSON values (objects, arrays, strings, numbers, booleans, nulls) in one schema. */
  nodes: 2_000,
  /** Nesting of objects and arrays in one schema. */
  depth: 24,
  /** Members of any one object (`properties`, `$defs`, ...). */
  keys: 200,
  /** Items of any one array (`enum`, `required`, `examples`, ...). */
  arrayItems: 500,
  /** Subschemas of one `anyOf`, `oneOf`, `allOf` or `prefixItems`. */
  branches: 64,
  /** JSON values once every `$ref` is replaced by its target: what one input may be checked against. */
  expanded: 10_000,
  /** JSON values of all the schemas of one registration or update together. */
  requestNodes: 5_000
} as const

/** Instance depths a profile tracks: a request body nests at most 64 levels (src/domain/Json.ts). */
export const PROFILE_DEPTH = 65

/** What validating against a schema may cost: schema values applying at each instance depth, and uniqueItems checks. */
export interface CostProfile {
  readonly byDepth: ReadonlyArray<number>
  readonly uniqueItems: number
}

export type SchemaBounds =
  | { readonly _tag: "Refused"; readonly issues: ReadonlyArray<SchemaIssue> }
  | { readonly _tag: "Bounded"; readonly nodes: number; readonly profile: CostProfile }

type Json = unknown
const isObject = (v: Json): v is Record<string, Json> => typeof v === "object" && v !== null && !Array.isArray(v)
const at = (path: string, key: string | number) => (path === "" ? String(key) : `${path}.${key}`)

const IN_PLACE_ONE = ["not", "if", "then", "else"]
const IN_PLACE_MANY = ["allOf", "anyOf", "oneOf"]
const IN_PLACE_MAP = ["dependentSchemas", "dependencies"]
const CHILD_ONE = ["additionalProperties", "propertyNames", "additionalItems", "contains", "unevaluatedItems", "unevaluatedProperties"]
const CHILD_MAP = ["properties", "patternProperties"]
const DEFINITIONS = ["$defs", "definitions"]
const BRANCHES = new Set([...IN_PLACE_MANY, "prefixItems"])

/** Pass 1, on the raw JSON: size, values, depth, members and items, without recursion; stops at the first breach. */
const structure = (schema: Json, prefix: string): SchemaIssue | undefined => {
  const text = JSON.stringify(schema)
  if (text.length > SCHEMA_LIMITS.bytes) {
    return { path: prefix, message: `is ${text.length} characters of JSON; a schema may have at most ${SCHEMA_LIMITS.bytes}` }
  }
  let nodes = 0
  const stack: Array<readonly [Json, string, number]> = [[schema, prefix, 1]]
  while (stack.length > 0) {
    const [value, path, depth] = stack.pop()!
    if (++nodes > SCHEMA_LIMITS.nodes) return { path: prefix, message: `has more than ${SCHEMA_LIMITS.nodes} JSON values; a schema may have at most ${SCHEMA_LIMITS.nodes}` }
    if (typeof value !== "object" || value === null) continue
    if (depth > SCHEMA_LIMITS.depth) return { path, message: `nests deeper than ${SCHEMA_LIMITS.depth} levels, the most a schema may` }
    if (Array.isArray(value)) {
      if (value.length > SCHEMA_LIMITS.arrayItems) return { path, message: `has ${value.length} items; an array in a schema may have at most ${SCHEMA_LIMITS.arrayItems}` }
      value.forEach((item, i) => stack.push([item, at(path, i), depth + 1]))
      continue
    }
    const entries = Object.entries(value)
    if (entries.length > SCHEMA_LIMITS.keys) return { path, message: `has ${entries.length} members; an object in a schema may have at most ${SCHEMA_LIMITS.keys}` }
    for (const [key, item] of entries) {
      if (BRANCHES.has(key) && Array.isArray(item) && item.length > SCHEMA_LIMITS.branches) {
        return { path: at(path, key), message: `has ${item.length} subschemas; ${key} may have at most ${SCHEMA_LIMITS.branches}` }
      }
      stack.push([item, at(path, key), depth + 1])
    }
  }
  return undefined
}

const countValues = (value: Json): number => {
  let n = 0
  const stack: Array<Json> = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    n++
    if (Array.isArray(v)) stack.push(...v)
    else if (isObject(v)) stack.push(...Object.values(v))
  }
  return n
}

class Refusal {
  constructor(readonly issue: SchemaIssue) {}
}

/** `#` or `#/json/pointer` (URI-encoded) from the document's root; other references are refused. */
const resolve = (root: Json, ref: string, path: string): Json => {
  if (!/^#(\/.*)?$/.test(ref)) {
    throw new Refusal({ path, message: `$ref "${ref.slice(0, 80)}" is not supported: only references inside the schema ("#" or "#/json/pointer") are` })
  }
  let target: Json = root
  for (const raw of ref.slice(1).split("/").slice(1)) {
    let key: string
    try {
      key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~")
    } catch {
      throw new Refusal({ path, message: `$ref "${ref.slice(0, 80)}" is not a valid JSON pointer` })
    }
    target = Array.isArray(target) ? target[Number(key)] : isObject(target) && Object.hasOwn(target, key) ? target[key] : undefined
    if (target === undefined) throw new Refusal({ path, message: `$ref "${ref.slice(0, 80)}" does not resolve inside the schema` })
  }
  return target
}

const add = (into: Array<number>, from: ReadonlyArray<number>, shift: number) => {
  for (let d = 0; d + shift < PROFILE_DEPTH && d < from.length; d++) into[d + shift] = (into[d + shift] ?? 0) + from[d]!
}

/** Pass 2, over schema positions: resolves `$ref`s (refusing cycles) and sums what applies at each instance depth. */
const profileOf = (root: Json, prefix: string): CostProfile => {
  const done = new Map<object, { byDepth: Array<number>; uniqueItems: number }>()
  const visiting = new Set<object>()

  const visit = (schema: Json, path: string): { byDepth: Array<number>; uniqueItems: number } => {
    if (!isObject(schema)) return { byDepth: [1], uniqueItems: 0 } // true, false (anything else fails meta-validation)
    const known = done.get(schema)
    if (known !== undefined) return known
    if (visiting.has(schema)) throw new Refusal({ path, message: "has a $ref cycle (a recursive schema); recursive schemas are not supported" })
    visiting.add(schema)
    const byDepth: Array<number> = [1]
    let uniqueItems = 0
    const inPlace = (sub: Json, p: string) => {
      const inner = visit(sub, p)
      add(byDepth, inner.byDepth, 0)
      uniqueItems += inner.uniqueItems
    }
    const child = (sub: Json, p: string) => {
      const inner = visit(sub, p)
      add(byDepth, inner.byDepth, 1)
      uniqueItems += inner.uniqueItems
    }
    for (const [key, value] of Object.entries(schema)) {
      const p = at(path, key)
      if (key === "$dynamicRef" || key === "$recursiveRef") throw new Refusal({ path: p, message: `${key} is not supported` })
      if (key === "$id" && schema !== root) throw new Refusal({ path: p, message: "$id is supported only at the schema's root" })
      if (key === "$ref" && typeof value === "string") inPlace(resolve(root, value, p), p)
      else if (IN_PLACE_ONE.includes(key)) inPlace(value, p)
      else if (IN_PLACE_MANY.includes(key) && Array.isArray(value)) value.forEach((s, i) => inPlace(s, at(p, i)))
      else if (IN_PLACE_MAP.includes(key) && isObject(value)) {
        for (const [k, s] of Object.entries(value)) {
          if (Array.isArray(s)) byDepth[0]! += countValues(s) // draft-07 dependencies: property names
          else inPlace(s, at(p, k))
        }
      } else if (CHILD_ONE.includes(key)) child(value, p)
      else if (CHILD_MAP.includes(key) && isObject(value)) for (const [k, s] of Object.entries(value)) child(s, at(p, k))
      else if ((key === "items" || key === "prefixItems") && Array.isArray(value)) value.forEach((s, i) => child(s, at(p, i)))
      else if (key === "items") child(value, p)
      else if (DEFINITIONS.includes(key)) byDepth[0]! += 1 // applied only through $ref
      else {
        if (key === "uniqueItems" && value === true) uniqueItems += 1
        byDepth[0]! += countValues(value)
      }
    }
    visiting.delete(schema)
    const result = { byDepth, uniqueItems }
    done.set(schema, result)
    return result
  }

  return visit(root, prefix)
}

/** Whether `schema` is within SCHEMA_LIMITS, and if so its size and cost profile. Costs about one pass over its JSON. */
export const schemaBounds = (schema: Json, prefix: string): SchemaBounds => {
  const breach = structure(schema, prefix)
  if (breach !== undefined) return { _tag: "Refused", issues: [breach] }
  try {
    const profile = profileOf(schema, prefix)
    const expanded = profile.byDepth.reduce((a, b) => a + b, 0)
    if (expanded > SCHEMA_LIMITS.expanded) {
      return {
        _tag: "Refused",
        issues: [{ path: prefix, message: `stands for ${expanded} JSON values once its $refs are expanded; a schema may stand for at most ${SCHEMA_LIMITS.expanded}` }]
      }
    }
    return { _tag: "Bounded", nodes: countValues(schema), profile }
  } catch (error) {
    if (error instanceof Refusal) return { _tag: "Refused", issues: [error.issue] }
    if (error instanceof RangeError) return { _tag: "Refused", issues: [{ path: prefix, message: "chains too many $refs" }] }
    throw error
  }
}
