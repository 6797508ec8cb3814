// Guards for JSON from outside before it reaches PostgreSQL (jsonb/text reject NUL and broken Unicode) or deep recursion.
export interface Issue {
  readonly path: string
  readonly message: string
}

/** Deepest nesting accepted in a request body (objects and arrays). */
export const MAX_JSON_DEPTH = 64

/** The deepest object/array nesting in a JSON text, found by a linear scan (no parsing, no recursion). */
export const jsonNestingDepth = (text: string): number => {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 123 || c === 91) {
      depth++
      if (depth > max) max = depth
    } else if (c === 125 || c === 93) depth--
  }
  return max
}

const badString = (s: string): string | undefined =>
  s.includes("\u0000") ? "must not contain NUL characters" : !s.isWellFormed() ? "must be well-formed Unicode (no lone surrogates)" : undefined

/** Strings (keys included) that PostgreSQL cannot store, reported by path; at most `limit` issues. */
export const unstorableStrings = (value: unknown, path: string, limit = 20): Array<Issue> => {
  const issues: Array<Issue> = []
  const stack: Array<[unknown, string]> = [[value, path]]
  while (stack.length > 0 && issues.length < limit) {
    const [current, at] = stack.pop()!
    if (typeof current === "string") {
      const problem = badString(current)
      if (problem !== undefined) issues.push({ path: at, message: problem })
    } else if (Array.isArray(current)) {
      current.forEach((item, i) => stack.push([item, at === "" ? String(i) : `${at}.${i}`]))
    } else if (typeof current === "object" && current !== null) {
      for (const [key, item] of Object.entries(current)) {
        const keyProblem = badString(key)
        const child = at === "" ? key : `${at}.${key}`
        if (keyProblem !== undefined) issues.push({ path: child, message: `key ${keyProblem}` })
        stack.push([item, child])
      }
    }
  }
  return issues
}

/** JSON pointer ("/a/0/b") as our dot path ("a.0.b"), under `prefix`. */
export const pointerToPath = (prefix: string, pointer: string): string => {
  const parts = pointer
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
  return [prefix, ...parts].filter((p) => p !== "").join(".")
}

/**
 * Canonical JSON (RFC 8785 JCS for JSON parsed from text): object keys sorted by UTF-16 code units, no whitespace,
 * strings and numbers as `JSON.stringify` writes them. The same value always gives the same text, whatever its key order.
 */
export const canonicalJson = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonicalJson).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(value) ?? "null"
