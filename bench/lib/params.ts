// Settings of the paid-execution bench (bench/execute.ts) from the environment, and the small helpers its parts share.
import * as path from "node:path"

// ---------------------------------------------------------------------------------------------------------------
// parameters

export const intEnv = (name: string, fallback: number) => {
  const raw = process.env[name]
  const n = raw === undefined ? fallback : Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer`)
  return n
}

export const ROOT = process.cwd()
export const PARAMS = {
  levels: [
    { concurrency: 1, warmup: intEnv("BENCH_C1_WARMUP", 50), requests: intEnv("BENCH_C1_REQUESTS", 300) },
    { concurrency: 32, warmup: intEnv("BENCH_C32_WARMUP", 200), requests: intEnv("BENCH_C32_REQUESTS", 1500) }
  ],
  /** WEB_CONCURRENCY of the marketplace phase (BENCH_WEB_CONCURRENCY, 1..16): its server processes on one port. */
  webConcurrency: (() => {
    const n = intEnv("BENCH_WEB_CONCURRENCY", 1)
    if (n < 1 || n > 16) throw new Error("BENCH_WEB_CONCURRENCY must be between 1 and 16")
    return n
  })(),
  agentMode: process.env["BENCH_AGENT"] === "inline" ? ("inline" as const) : ("child" as const),
  profile: (() => {
    const value = process.env["BENCH_PROFILE"] ?? "auto"
    if (value !== "auto" && value !== "always" && value !== "never") throw new Error("BENCH_PROFILE must be auto, always or never")
    return value
  })(),
  output: process.env["BENCH_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md"),
  agentFee: 10_000n, // "0.01"
  platformFee: 1_000n, // 0.001
  registrationFee: 100_000n, // 0.10
  operatorToken: "bench-operator-token-Jc4mP9sV2xN7qR5w",
  settlementProbe: { sequential: 40, concurrent: 400, inFlight: 32 },
  diagnostics: { roundTripRequests: 100, profileWarmup: 100, profileRequests: 400, profileConcurrency: intEnv("BENCH_PROFILE_CONCURRENCY", 32) }
}
export const PRICE = PARAMS.agentFee + PARAMS.platformFee

export class BenchError extends Error {
  override readonly name = "BenchError"
}

export const log = (line: string) => console.log(line)
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
export const ms = (n: number) => n.toFixed(n < 10 ? 2 : 1)

// ---------------------------------------------------------------------------------------------------------------
// small JSON helpers (responses are unknown)

export const at = (value: unknown, ...keys: ReadonlyArray<string>): unknown => {
  let v = value
  for (const k of keys) {
    if (typeof v !== "object" || v === null || !(k in v)) return undefined
    v = (v as Record<string, unknown>)[k]
  }
  return v
}

export const postJson = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000)
  })
  const text = await response.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = text
  }
  return { status: response.status, body: json, text }
}
