// One webhook delivery (to a subscription or an execution's callback URL): attempts at once, then after 1 s, 2 s, 4 s and
// 5 minutes; delivered on a 2xx, dead-lettered after the 5th failure; a callback post replaced by a newer result of its
// execution is superseded. Every attempt is logged by the host; the retry time is saved with the snapshot.
import { assign, setup } from "xstate"

export const MAX_ATTEMPTS = 5
/** Wait before attempt n+1 after attempt n failed (n = 1..4). */
export const retryDelayMs = (attempt: number) => [1_000, 2_000, 4_000, 300_000][attempt - 1] ?? 300_000

export interface DeliveryContext {
  readonly attempts: number
  readonly nextAttemptAt: number | null
}

export type DeliveryEvent =
  | { readonly type: "DELIVERED"; readonly at: number; readonly status: number }
  | { readonly type: "ATTEMPT_FAILED"; readonly at: number; readonly status: number | null; readonly error: string }
  /** A newer post to the same callback (the execution's next result) replaces this one before it was delivered. */
  | { readonly type: "SUPERSEDED"; readonly at: number; readonly by: string }

export const deliveryMachine = setup({
  types: { context: {} as DeliveryContext, events: {} as DeliveryEvent, input: {} as Record<string, never> },
  actions: {
    /** Host: the subscription's consecutive failures (disabled at 10) or its last success; nothing for a callback. */
    countOutcome: (_, _params: { readonly success: boolean }) => {},
    /** Host: the dead-letter entry. */
    deadLetter: () => {},
    countAttempt: assign({ attempts: ({ context }) => context.attempts + 1 }),
    planRetry: assign({ nextAttemptAt: ({ context, event }) => event.at + retryDelayMs(context.attempts) })
  },
  guards: { exhausted: ({ context }) => context.attempts + 1 >= MAX_ATTEMPTS }
}).createMachine({
  id: "webhookDelivery",
  initial: "pending",
  context: { attempts: 0, nextAttemptAt: null },
  states: {
    pending: {
      on: {
        DELIVERED: { target: "delivered", actions: ["countAttempt", { type: "countOutcome", params: { success: true } }] },
        ATTEMPT_FAILED: [
          { guard: "exhausted", target: "dead", actions: ["countAttempt", { type: "countOutcome", params: { success: false } }, "deadLetter"] },
          { actions: ["countAttempt", "planRetry", { type: "countOutcome", params: { success: false } }] }
        ],
        SUPERSEDED: { target: "superseded" }
      }
    },
    delivered: { type: "final" },
    dead: { type: "final" },
    superseded: { type: "final" }
  }
})
