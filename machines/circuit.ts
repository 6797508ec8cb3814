// The agent circuit breaker: closed → open → half-open → closed. Deadlines are data (retryAt), fired as events by a durable timer.
import { assign, setup } from "xstate"

export type CircuitState = "closed" | "open" | "half-open"

export interface CircuitContext {
  readonly resetTimeoutMs: number
  readonly openedAt: number | null
  /** When an open circuit lets a trial call through (becomes half-open). */
  readonly retryAt: number | null
  readonly trips: number
  /** Held open by an operator: no probe, no reset, until an operator closes it (absent in snapshots stored before). */
  readonly forced?: boolean
}

export type CircuitEvent =
  /** Too many failures (opossum opened), or a trial call failed while half-open. */
  | { readonly type: "TRIP"; readonly at: number }
  /** The retry deadline passed (durable timer, or opossum went half-open). */
  | { readonly type: "PROBE"; readonly at: number }
  /** A call succeeded while not closed (opossum closed, or any process saw a success). */
  | { readonly type: "RESET"; readonly at: number }
  /** Operator levers: `by` is the operator's name, `reason` why (kept in the transition history). */
  | { readonly type: "FORCE_OPEN"; readonly at: number; readonly by: string; readonly reason: string }
  | { readonly type: "FORCE_CLOSE"; readonly at: number; readonly by: string; readonly reason: string }

export const circuitMachine = setup({
  types: {
    context: {} as CircuitContext,
    events: {} as CircuitEvent,
    input: {} as { readonly resetTimeoutMs: number }
  },
  actions: {
    /** Host: persist a durable timer that sends PROBE at `at`. */
    scheduleProbe: (_, _params: { readonly at: number }) => {},
    /** Host: publish the new state (agent row, caches). */
    circuitChanged: (_, _params: { readonly state: CircuitState }) => {},
    clearDeadline: assign({ openedAt: null, retryAt: null })
  },
  guards: {
    retryDue: ({ context, event }) => context.forced !== true && (context.retryAt === null || event.at >= context.retryAt),
    notForced: ({ context }) => context.forced !== true
  }
}).createMachine({
  id: "circuit",
  initial: "closed",
  context: ({ input }) => ({ resetTimeoutMs: input.resetTimeoutMs, openedAt: null, retryAt: null, trips: 0, forced: false }),
  states: {
    closed: {
      on: { TRIP: "open", FORCE_OPEN: { target: "open", actions: assign({ forced: true }) } }
    },
    open: {
      entry: [
        assign({
          openedAt: ({ event }) => event.at,
          retryAt: ({ context, event }) => event.at + context.resetTimeoutMs,
          trips: ({ context }) => context.trips + 1
        }),
        { type: "scheduleProbe", params: ({ context }) => ({ at: context.retryAt ?? 0 }) },
        { type: "circuitChanged", params: { state: "open" } }
      ],
      on: {
        // A forced circuit ignores its probe timer and successes seen elsewhere: only FORCE_CLOSE ends it.
        PROBE: { target: "half-open", guard: "retryDue" },
        RESET: { guard: "notForced", target: "closed", actions: ["clearDeadline", { type: "circuitChanged", params: { state: "closed" } }] },
        FORCE_OPEN: { guard: "notForced", actions: assign({ forced: true }) },
        FORCE_CLOSE: { target: "closed", actions: ["clearDeadline", assign({ forced: false }), { type: "circuitChanged", params: { state: "closed" } }] }
      }
    },
    "half-open": {
      entry: { type: "circuitChanged", params: { state: "half-open" } },
      on: {
        TRIP: "open",
        RESET: { target: "closed", actions: ["clearDeadline", { type: "circuitChanged", params: { state: "closed" } }] },
        FORCE_OPEN: { target: "open", actions: assign({ forced: true }) },
        FORCE_CLOSE: { target: "closed", actions: ["clearDeadline", { type: "circuitChanged", params: { state: "closed" } }] }
      }
    }
  }
})
