// What validating one input against a schema may cost, estimated before ajv runs: the schema's cost profile (schema
// values applying at each instance depth) times the input's values at that depth. Linear in the input, no recursion.
import { type CostProfile, PROFILE_DEPTH } from "./schemaBounds.js"

/**
 * Work one validation may cost; a unit is one schema value applied to one input value (tens of nanoseconds in ajv), so
 * the limit keeps any one validation to tens of milliseconds (measured: docs/decisions/hostile-input.md).
 */
export const MAX_VALIDATION_WORK = 2_000_000
/** A string (or key) counts as one value per this many characters: length, enum and const checks read it whole. */
const CHARS_PER_UNIT = 64

const weight = (v: unknown) => (typeof v === "string" ? 1 + Math.floor(v.length / CHARS_PER_UNIT) : 1)

/**
 * The estimated work of checking `value` against a schema of `profile`; the walk stops once past `limit` (and returns
 * Infinity for input nested deeper than a profile tracks where uniqueItems must read it). Input below the deepest
 * schema level is not walked: nothing checks it (uniqueItems aside, which reads whole items and is charged per value).
 */
export const validationWork = (profile: CostProfile, value: unknown, limit = MAX_VALIDATION_WORK): number => {
  let work = 0
  const stack: Array<readonly [unknown, number, number]> = [[value, 0, weight(value)]]
  while (stack.length > 0) {
    const [v, depth, units] = stack.pop()!
    if (depth >= PROFILE_DEPTH) {
      if (profile.uniqueItems > 0) return Infinity
      continue
    }
    const applying = profile.byDepth[depth] ?? 0
    work += (applying + profile.uniqueItems) * units
    if (work > limit) return work
    if (applying === 0 && profile.uniqueItems === 0) continue
    if (Array.isArray(v)) for (const item of v) stack.push([item, depth + 1, weight(item)])
    else if (typeof v === "object" && v !== null) {
      for (const [key, item] of Object.entries(v)) stack.push([item, depth + 1, weight(item) + weight(key)])
    }
  }
  return work
}

/**
 * Inputs this light (values, a string or key counting one per 64 characters) are validated without the hard deadline:
 * every keyword's work is at most the schema's values ($refs expanded, at most 10,000) times the input's, a few
 * milliseconds here, so the watchdog's ~40 µs would buy nothing on the usual paid call.
 */
export const LIGHT_INPUT_UNITS = 2_000

/** Whether `value` weighs at most `limit` units; stops walking as soon as it is heavier. */
export const isLightInput = (value: unknown, limit = LIGHT_INPUT_UNITS): boolean => {
  let units = 0
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    units += weight(v)
    if (units > limit) return false
    if (Array.isArray(v)) for (const item of v) stack.push(item)
    else if (typeof v === "object" && v !== null) {
      for (const [key, item] of Object.entries(v)) {
        units += weight(key)
        stack.push(item)
      }
    }
  }
  return true
}
