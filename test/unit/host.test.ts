import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { circuitMachine } from "../../machines/circuit.js"
import type { MachineSpec } from "../../machines/runner.js"
import { startMachine } from "../../machines/step.js"

describe("machine specs", () => {
  it("must handle every action the machine declares (a missing handler is a type error)", () => {
    const base = {
      machine: circuitMachine,
      pure: ["clearDeadline"] as const,
      lock: () => Effect.succeed(Option.some({})),
      snapshot: () => startMachine(circuitMachine, { resetTimeoutMs: 1 }).persisted,
      save: () => Effect.void,
      timerEvent: () => Option.none()
    }
    // @ts-expect-error circuitChanged has no handler
    const missing: MachineSpec<typeof circuitMachine, object, "clearDeadline"> = { ...base, actions: { scheduleProbe: () => Effect.void } }
    const complete: MachineSpec<typeof circuitMachine, object, "clearDeadline"> = {
      ...base,
      actions: {
        // Params are typed from the machine's setup: `at` is a number here.
        scheduleProbe: ({ at }) => Effect.sync(() => void at.toFixed()),
        circuitChanged: ({ state }) => Effect.sync(() => void state.length)
      }
    }
    expect(Object.keys(complete.actions).sort()).toEqual(["circuitChanged", "scheduleProbe"])
    expect(missing.machine).toBe(circuitMachine)
  })
})
