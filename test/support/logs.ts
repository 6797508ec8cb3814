// The service's log lines in tests: stdout captured while an effect runs (not passed on to the terminal), read as JSON.
import { Effect, type Scope } from "effect"
import { vi } from "vitest"

/** Every line the service writes to stdout while `effect` runs. */
export const capturingStdout = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<{ readonly result: A; readonly lines: Array<string> }, E, R | Scope.Scope> =>
  Effect.gen(function* () {
    const lines = yield* stdoutLines
    const result = yield* effect
    return { result, lines } as const
  })

/** Stdout's lines from now on, kept from the terminal until the scope closes. */
const stdoutLines = Effect.gen(function* () {
  const lines: Array<string> = []
  yield* Effect.acquireRelease(
    Effect.sync(() =>
      vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
        lines.push(...String(chunk).split("\n").filter((l) => l !== ""))
        return true
      })),
    (spy) => Effect.sync(() => spy.mockRestore())
  )
  return lines
})

export type LogRecord = Record<string, unknown>

/** Lines written from now on (LOG_FORMAT=json), read as records whenever asked; stops with the test's scope. */
export const recordingLogs = Effect.gen(function* () {
  const lines = yield* stdoutLines
  const records = (): Array<LogRecord> => lines.flatMap((line) => (line.startsWith("{") ? [JSON.parse(line) as LogRecord] : []))
  /** The records of one `event` whose fields include `fields`. */
  const find = (event: string, fields: LogRecord = {}) =>
    records().filter((r) => r["event"] === event && Object.entries(fields).every(([k, v]) => r[k] === v))
  return { records, find } as const
})
