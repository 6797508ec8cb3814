// One agent-to-agent chain: pending until the root payment settled, running while sub-calls may spend its budget, ended
// once its root answered and no sub-call is in flight (checked after every answer, and by a durable timer after a crash).
import { setup } from "xstate"

/** The whole chain's time limit (spec section 8); after it no sub-call is reserved. */
export const CHAIN_TIMEOUT_MS = 5 * 60_000
/** A chain not quiet at its deadline (a sub-call still running, the root payment unsettled) is checked again this often. */
export const CHAIN_RECHECK_MS = 60_000

export type ChainPayment = "pending" | "settled" | "failed"

/**
 * `deadline` is the machine's own; the rest are facts read from the database under the chain row's lock each time an
 * event is delivered (the host's spec merges them in), so the guards decide on the truth, not on a copy.
 */
export interface ChainContext {
  readonly deadline: number
  readonly rootAnswered: boolean
  readonly inFlight: number
  readonly payment: ChainPayment
}

export type ChainEvent =
  /** The root payment settled: the budget is treasury money and sub-calls may spend it. */
  | { readonly type: "FUNDED"; readonly at: number }
  /** Something in the chain answered: end it if it is quiet. */
  | { readonly type: "CHECK"; readonly at: number }
  /** The durable timer (at the deadline, then every CHAIN_RECHECK_MS until the chain is quiet). */
  | { readonly type: "TIMEOUT"; readonly at: number }

const end = { guard: "quiet", target: "ended" } as const
const recheck = { actions: { type: "scheduleTimeout", params: ({ event }: { readonly event: ChainEvent }) => ({ at: event.at + CHAIN_RECHECK_MS }) } } as const

export const chainMachine = setup({
  types: {
    context: {} as ChainContext,
    events: {} as ChainEvent,
    input: {} as { readonly deadline: number }
  },
  actions: {
    /** Host: the durable timer that sends TIMEOUT at `at`. */
    scheduleTimeout: (_, _params: { readonly at: number }) => {},
    cancelTimeout: () => {},
    /**
     * Host: the chain's outcome (completed, failed, partial), the unspent budget refunded to the payer on chain (or voided
     * when the root payment failed), chain.completed. Runs once: `ended` is final.
     */
    finish: () => {}
  },
  guards: {
    /** Nothing more can spend or give back budget, and where the budget goes (payer or void) is known. */
    quiet: ({ context }) => context.rootAnswered && context.inFlight === 0 && context.payment !== "pending"
  }
}).createMachine({
  id: "chain",
  initial: "pending",
  context: ({ input }) => ({ deadline: input.deadline, rootAnswered: false, inFlight: 0, payment: "pending" }),
  states: {
    pending: {
      entry: { type: "scheduleTimeout", params: ({ context }) => ({ at: context.deadline }) },
      on: {
        FUNDED: { target: "running" },
        CHECK: end,
        TIMEOUT: [end, recheck]
      }
    },
    running: {
      on: {
        CHECK: end,
        TIMEOUT: [end, recheck]
      }
    },
    ended: { type: "final", entry: ["cancelTimeout", "finish"] }
  }
})
