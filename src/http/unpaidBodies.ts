// The budget of large request bodies a client address may make this process read before paying: bodies above
// UNPAID_BODY_FREE_BYTES count against UNPAID_BODY_BYTES_PER_MINUTE per address, reserved before the body is read and
// given back when the request succeeds (a paid call, an authenticated change). Kept in memory: what it protects is this
// process's CPU, so each process keeps its own.
import { Config } from "effect"

export const UnpaidBodyConfig = Config.all({
  freeBytes: Config.integer("UNPAID_BODY_FREE_BYTES").pipe(
    Config.withDefault(64 * 1024),
    Config.validate({ message: "UNPAID_BODY_FREE_BYTES must be between 1024 and 67108864", validation: (n) => n >= 1024 && n <= 64 * 1024 * 1024 })
  ),
  bytesPerMinute: Config.integer("UNPAID_BODY_BYTES_PER_MINUTE").pipe(
    Config.withDefault(8 * 1024 * 1024),
    Config.validate({ message: "UNPAID_BODY_BYTES_PER_MINUTE must be between 1024 and 1073741824", validation: (n) => n >= 1024 && n <= 1024 * 1024 * 1024 })
  )
})
export type UnpaidBodyConfig = Config.Config.Success<typeof UnpaidBodyConfig>

const WINDOW_MS = 60_000
/** Addresses tracked at once; past it, windows that have ended are forgotten first. */
const MAX_ADDRESSES = 100_000

export type Reservation =
  /** Not a large body, or within the budget: `succeeded` gives it back once the request has succeeded. */
  | { readonly _tag: "Reserved"; readonly succeeded: () => void }
  | { readonly _tag: "Refused"; readonly retryAfterSeconds: number }

export const makeUnpaidBodyBudget = ({ bytesPerMinute, freeBytes }: UnpaidBodyConfig) => {
  const windows = new Map<string, { start: number; bytes: number }>()
  const nothing: Reservation = { _tag: "Reserved", succeeded: () => {} }

  const forgetEnded = (start: number) => {
    for (const [address, window] of windows) if (window.start < start) windows.delete(address)
  }

  /** A body of `length` bytes from `address` at `nowMs`, before it is read. */
  const reserve = (address: string, length: number, nowMs: number): Reservation => {
    if (!(length > freeBytes)) return nothing // also a length that is not a number (Node refuses those first)
    const start = Math.floor(nowMs / WINDOW_MS) * WINDOW_MS
    let window = windows.get(address)
    if (window === undefined || window.start !== start) {
      if (window === undefined && windows.size >= MAX_ADDRESSES) forgetEnded(start)
      window = { start, bytes: 0 }
      windows.set(address, window)
    }
    if (window.bytes + length > bytesPerMinute) {
      return { _tag: "Refused", retryAfterSeconds: Math.max(1, Math.ceil((start + WINDOW_MS - nowMs) / 1000)) }
    }
    window.bytes += length
    const charged = window
    return {
      _tag: "Reserved",
      succeeded: () => {
        if (windows.get(address) === charged) charged.bytes = Math.max(0, charged.bytes - length)
      }
    }
  }

  return { reserve, freeBytes, bytesPerMinute } as const
}
