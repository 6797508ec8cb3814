// An agent's withdrawal: pending (funds taken from available, the payout queued) → processing (a treasury transaction
// is signed and stored) → completed (the Transfer log paid the destination the net amount) or failed (funds returned).
// A payout whose transaction was dropped (its nonce went to another) goes back to pending and is sent again.
import { assign, setup } from "xstate"

export interface WithdrawalContext {
  readonly attempts: number
  readonly lastError: string | null
}

export type WithdrawalEvent =
  /** The payout transaction is signed and stored (it may already be on its way). */
  | { readonly type: "SUBMITTED"; readonly at: number; readonly txId: string }
  /** Mined, and its Transfer log pays the destination exactly the net amount. */
  | { readonly type: "PAID"; readonly at: number; readonly txHash: string; readonly block: string }
  /** Its nonce went to another transaction: these bytes can never be mined; send again. */
  | { readonly type: "DROPPED"; readonly at: number; readonly reason: string }
  /** Mined without paying (reverted: the treasury was short), or refused before sending: the funds go back. */
  | { readonly type: "FAILED"; readonly at: number; readonly reason: string }

export const withdrawalMachine = setup({
  types: {
    context: {} as WithdrawalContext,
    events: {} as WithdrawalEvent,
    input: {} as Record<string, never>
  },
  actions: {
    /** Host: the payout left the treasury (withdrawals payable settled against the treasury, in its block). */
    bookPayout: (_, _params: { readonly txHash: string; readonly block: string }) => {},
    /** Host: the amount goes back to the agent's available balance, the fee included. */
    returnFunds: (_, _params: { readonly reason: string }) => {},
    /** Host: withdrawal.completed / withdrawal.failed. */
    announce: (_, _params: { readonly outcome: "completed" | "failed" }) => {},
    noteError: assign({ lastError: ({ event }) => ("reason" in event ? event.reason : null) })
  }
}).createMachine({
  id: "withdrawal",
  initial: "pending",
  context: { attempts: 0, lastError: null },
  states: {
    pending: {
      on: {
        SUBMITTED: { target: "processing", actions: assign({ attempts: ({ context }) => context.attempts + 1 }) },
        FAILED: "failed"
      }
    },
    processing: {
      on: {
        PAID: {
          target: "completed",
          actions: { type: "bookPayout", params: ({ event }) => ({ txHash: event.txHash, block: event.block }) }
        },
        DROPPED: { target: "pending", actions: "noteError" },
        FAILED: "failed"
      }
    },
    completed: { type: "final", entry: { type: "announce", params: { outcome: "completed" } } },
    failed: {
      type: "final",
      entry: [
        "noteError",
        { type: "returnFunds", params: ({ event }) => ({ reason: "reason" in event ? event.reason : "failed" }) },
        { type: "announce", params: { outcome: "failed" } }
      ]
    }
  }
})
