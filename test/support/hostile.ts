// Hostile schemas and inputs for issue 24 (schemas that cost to compile, inputs that cost to validate), and what tests of
// them measure on a real server process: timed unpaid requests, MCP tool calls, the process's resident memory.
import { readFile } from "node:fs/promises"
import { ErrorCodes } from "../../src/domain/Errors.js"

/** The heap cap of `npm start` (package.json), given to the server processes of these tests. */
export const HEAP_CAP_OPTIONS = "--max-old-space-size=256"
export const MIB = 1024 * 1024

/** A reproducible stream of numbers in [0, 1) (mulberry32). */
export const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
export const between = (next: () => number, min: number, max: number) => min + Math.floor(next() * (max - min + 1))

/** The attack: an object schema with `n` properties (20,000: ~800 KB). */
export const wideSchema = (n: number) => ({
  type: "object",
  properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "string", maxLength: 64 }]))
})
export const deepSchema = (levels: number) => {
  let schema: object = { type: "string" }
  for (let i = 1; i < levels; i++) schema = { type: "object", properties: { a: schema } }
  return schema
}
export const branchesSchema = (keyword: "anyOf" | "oneOf" | "allOf", n: number) => ({
  [keyword]: Array.from({ length: n }, (_, i) => ({ type: "object", properties: { [`k${i}`]: { const: i } }, required: [`k${i}`] }))
})
/** d0 → allOf [d1, d1] → ...: 2^levels checks of one value. */
export const doublingSchema = (levels: number, leaf: object = { type: "string" }) => {
  const $defs: Record<string, unknown> = { [`d${levels}`]: leaf }
  for (let i = 0; i < levels; i++) $defs[`d${i}`] = { allOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] }
  return { $defs, $ref: "#/$defs/d0" }
}
export const cycleSchema = (length: number) => {
  const $defs: Record<string, unknown> = {}
  for (let i = 0; i < length; i++) $defs[`n${i}`] = { type: "object", properties: { next: { $ref: `#/$defs/n${(i + 1) % length}` } } }
  return { $defs, $ref: "#/$defs/n0" }
}
/** `n` definitions, each used `uses` times (what inlined $refs copy). */
export const sharedRefsSchema = (defs: number, uses: number) => ({
  $defs: Object.fromEntries(Array.from({ length: defs }, (_, d) => [`d${d}`, wideSchema(20)])),
  type: "object",
  properties: Object.fromEntries(Array.from({ length: uses }, (_, i) => [`r${i}`, { $ref: `#/$defs/d${i % defs}` }]))
})
export const enumSchema = (n: number) => ({ enum: Array.from({ length: n }, (_, i) => `value-${i}`) })
export const patternSchema = (pattern: string) => ({ type: "object", properties: { text: { type: "string", pattern } } })

/** Schemas an agent may register that still invite costly inputs. */
export const ACCEPTED_SCHEMAS = {
  unique: { type: "object", properties: { items: { type: "array", uniqueItems: true } }, required: ["items"] },
  heavy: { type: "object", properties: { items: { type: "array", items: branchesSchema("allOf", 64) } } },
  pattern: patternSchema("^([a-z0-9]+-)*[a-z0-9]+$"),
  enum: { type: "object", properties: { v: enumSchema(500) } },
  deep: { type: "object", properties: { a: deepSchema(10) } },
  refs: doublingSchema(8, { type: "object", properties: { a: { type: "string", maxLength: 100 } } })
} as const

export type Capability = keyof typeof ACCEPTED_SCHEMAS

export interface Answer {
  readonly status: number
  readonly ms: number
  readonly body: any
}

/** A request's status, parsed body and round-trip time (the body is sent as given, or as JSON). */
export const timed = async (url: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> => {
  const started = performance.now()
  const response = await fetch(url, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
    ...(init.body === undefined ? {} : { body: typeof init.body === "string" ? init.body : JSON.stringify(init.body) }),
    signal: AbortSignal.timeout(30_000)
  })
  const text = await response.text()
  const ms = performance.now() - started
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { status: response.status, ms, body }
}

/**
 * An MCP tool call as a stateless JSON-RPC request (`accept: application/json`: no session, one JSON answer), its body
 * serialized now: call the result to send it.
 */
export const mcpCall = (baseUrl: string, name: string, args: unknown) => {
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } })
  return () => timed(`${baseUrl}/mcp`, { body, headers: { accept: "application/json" } })
}

/** The spec's failure envelope with a known code whose status is `status` (a 4xx). */
export const isClientErrorEnvelope = (status: number, body: any) =>
  status >= 400 && status < 500 && body?.success === false && typeof body.error?.message === "string" &&
  typeof body.error?.code === "string" && (ErrorCodes as Record<string, { status: number }>)[body.error.code]?.status === status

/** An MCP tool error carrying a 4xx envelope, or x402's payment challenge (validation passed; nothing charged). */
export const isMcpClientError = (answer: Answer) => {
  const result = answer.body?.result
  if (answer.status !== 200 || result?.isError !== true) return false
  const text: unknown = result.content?.[0]?.text
  if (typeof text !== "string") return false
  const parsed = JSON.parse(text)
  if (parsed["x402/error"]?.code === 402) return true
  const code = parsed?.error?.code
  const status = (ErrorCodes as Record<string, { status: number }>)[code]?.status
  return status !== undefined && isClientErrorEnvelope(status, parsed)
}

/** Resident memory of a process (kB in /proc → bytes): now (VmRSS) and its peak (VmHWM). */
export const residentMemory = async (pid: number) => {
  const status = await readFile(`/proc/${pid}/status`, "utf8")
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024
  return { rss: kb("VmRSS"), peak: kb("VmHWM") }
}

/** CPU time a process has used (user + system), in seconds, from /proc/<pid>/stat. */
export const cpuSeconds = async (pid: number) => {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100 // utime, stime in clock ticks (USER_HZ = 100)
}

export const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? NaN
}
