// `uniqueItems` in linear time for ajv: ajv's own keyword compares every pair of non-primitive items (20,000 items took
// 5.2 s of CPU before payment); this one puts each item's canonical JSON (keys sorted) in a map.
import type { FuncKeywordDefinition, SchemaValidateFunction } from "ajv"

/** JSON text with object keys sorted: equal for exactly the values JSON Schema calls equal. */
const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`
  if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(",")}}`
  }
  return JSON.stringify(value) ?? "null"
}

/** The first pair of equal items, as [earlier, later] indices. */
export const firstDuplicate = (items: ReadonlyArray<unknown>): readonly [number, number] | undefined => {
  const seen = new Map<string, number>()
  for (let i = 0; i < items.length; i++) {
    const key = canonical(items[i])
    const earlier = seen.get(key)
    if (earlier !== undefined) return [earlier, i]
    seen.set(key, i)
  }
  return undefined
}

const validate: SchemaValidateFunction = (schema: unknown, data: unknown) => {
  if (schema !== true || !Array.isArray(data)) return true
  const duplicate = firstDuplicate(data)
  if (duplicate === undefined) return true
  const [j, i] = duplicate
  validate.errors = [{ keyword: "uniqueItems", params: { i, j }, message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)` }]
  return false
}

/** Replaces ajv's built-in keyword (`ajv.removeKeyword("uniqueItems").addKeyword(uniqueItemsKeyword)`). */
export const uniqueItemsKeyword: FuncKeywordDefinition = { keyword: "uniqueItems", type: "array", schemaType: "boolean", errors: true, validate }
