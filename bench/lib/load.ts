// Closed-loop load generator: N workers, each sending its next request as soon as the previous one answered.
import { Pool } from "undici"

export interface Job {
  readonly headers: Record<string, string>
  /** A POST body; without one the job is a GET. */
  readonly body?: string
  /** The job's own path (default: the run's `path`). */
  readonly path?: string
}

export interface RunResult {
  readonly requests: number
  readonly concurrency: number
  readonly wallMs: number
  /** Per request, in completion order. */
  readonly latenciesMs: Float64Array
  readonly errors: number
  readonly errorSamples: ReadonlyArray<string>
}

/**
 * Sends every job once (POST `path` with its body, or GET its own path), `concurrency` at a time; `check` returns a problem description for a bad answer
 * (non-2xx is always one).
 */
export const runClosedLoop = async (options: {
  readonly origin: string
  readonly path: string
  readonly jobs: ReadonlyArray<Job>
  readonly concurrency: number
  /** `answer`: the job's index and its send and answer times (performance.now()), for benches that track each request. */
  readonly check: (body: unknown, answer: { readonly index: number; readonly startedMs: number; readonly endedMs: number }) => string | undefined
  readonly timeoutMs?: number
}): Promise<RunResult> => {
  const { jobs, concurrency } = options
  const pool = new Pool(options.origin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 60_000 })
  const latencies = new Float64Array(jobs.length)
  const errorSamples: Array<string> = []
  let errors = 0
  let done = 0
  let next = 0
  const fail = (i: number, problem: string) => {
    errors++
    if (errorSamples.length < 5) errorSamples.push(`request ${i}: ${problem.slice(0, 600)}`)
  }
  const worker = async () => {
    for (;;) {
      const i = next++
      const job = jobs[i]
      if (job === undefined) return
      const started = performance.now()
      try {
        const response = await pool.request({
          path: job.path ?? options.path,
          ...(job.body === undefined
            ? { method: "GET" as const, headers: job.headers }
            : { method: "POST" as const, headers: { "content-type": "application/json", ...job.headers }, body: job.body }),
          headersTimeout: options.timeoutMs ?? 60_000,
          bodyTimeout: options.timeoutMs ?? 60_000
        })
        const text = await response.body.text()
        const ended = performance.now()
        latencies[done++] = ended - started
        if (response.statusCode < 200 || response.statusCode > 299) {
          fail(i, `HTTP ${response.statusCode}: ${text}`)
          continue
        }
        let parsed: unknown
        try {
          parsed = JSON.parse(text)
        } catch {
          fail(i, `HTTP ${response.statusCode} with a non-JSON body: ${text}`)
          continue
        }
        const problem = options.check(parsed, { index: i, startedMs: started, endedMs: ended })
        if (problem !== undefined) fail(i, `${problem}: ${text}`)
      } catch (error) {
        latencies[done++] = performance.now() - started
        fail(i, `request error: ${String(error)}`)
      }
    }
  }
  const started = performance.now()
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker))
  } finally {
    await pool.close()
  }
  return { requests: jobs.length, concurrency, wallMs: performance.now() - started, latenciesMs: latencies, errors, errorSamples }
}

/** Nearest-rank percentile of unsorted data. */
export const percentile = (values: Float64Array, p: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = Float64Array.from(values).sort()
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1] ?? Number.NaN
}

export const mean = (values: Float64Array): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length)
