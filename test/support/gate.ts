// A fault hook for tests of the group commit: holds one settlement transaction in flight so that the payments arriving
// meanwhile form one batch.
import { Effect } from "effect"

/**
 * Holds the first settlement sent after `arm()` in flight (after its broadcast) until `open()`: the payments that
 * arrive meanwhile queue behind it, which makes the batch the test expects deterministic.
 */
export const makeGate = () => {
  let armed = false
  let release: () => void = () => {}
  let opened = Promise.resolve()
  return {
    arm: () => {
      armed = true
      opened = new Promise<void>((resolve) => (release = resolve))
    },
    open: () => release(),
    afterBroadcast: (tx: { readonly purpose: string }) =>
      Effect.suspend(() => {
        if (!armed || tx.purpose !== "settlement") return Effect.void
        armed = false
        return Effect.promise(() => opened)
      })
  }
}
