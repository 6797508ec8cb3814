// A hard wall-clock bound on synchronous work: `run` is called from a vm script with a timeout, so V8 terminates it
// wherever it is (ajv's generated code, a WASM call, a library's loop) once the time is up. No thread hop, no copy of the
// input: the watchdog costs ~40 µs per call (measured in docs/security.md).
import * as vm from "node:vm"

const context = vm.createContext({ run: undefined })
const script = new vm.Script("run()", { filename: "hardDeadline.vm" })

export type Bounded<A> = { readonly _tag: "Done"; readonly value: A } | { readonly _tag: "Overrun" }

const isTimeout = (error: unknown) =>
  typeof error === "object" && error !== null && "code" in error && error.code === "ERR_SCRIPT_EXECUTION_TIMEOUT"

/**
 * Runs `run` for at most `ms` milliseconds. Interrupted code runs none of its `finally` blocks: whatever state it shares
 * must be repaired by the caller on `Overrun` (the pattern engine's `recover`). Not re-entrant, and need not be: it is
 * synchronous.
 */
export const withinDeadline = <A>(ms: number, run: () => A): Bounded<A> => {
  let result: Bounded<A> = { _tag: "Overrun" }
  context["run"] = () => {
    result = { _tag: "Done", value: run() }
  }
  try {
    script.runInContext(context, { timeout: ms })
    return result
  } catch (error) {
    if (isTimeout(error)) return { _tag: "Overrun" }
    throw error
  } finally {
    context["run"] = undefined
  }
}
