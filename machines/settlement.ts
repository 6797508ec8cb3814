// The settlement of one payment on chain: reserved (pending) → settled, or retrying after transient faults, or failed for good.
import { assign, setup } from "xstate"

export interface SettlementContext {
  readonly attempts: number
  readonly nextAttemptAt: number | null
  readonly txHash: string | null
  readonly reason: string | null
}

export type SettlementEvent =
  /** `block`: where the transfer was mined (whoever sent it); null when only a facilitator's word is known. */
  | { readonly type: "SETTLED"; readonly at: number; readonly txHash: string; readonly block?: string | null }
  /** RPC unreachable, no receipt yet: try again later. */
  | { readonly type: "FAILED_TRANSIENT"; readonly at: number; readonly error: string }
  /** It can never settle (reverted, funds gone, authorization expired or used elsewhere). */
  | { readonly type: "FAILED_FINAL"; readonly at: number; readonly reason: string }
  /** An upto authorization whose call charged nothing (it failed or timed out): it is never to settle. Not a fault. */
  | { readonly type: "UNUSED"; readonly at: number; readonly reason: string }
  | { readonly type: "RETRY_DUE"; readonly at: number }
  /** Operator lever: try again now instead of at the backoff's time (`by`: the operator's name, `reason`: why). */
  | { readonly type: "RETRY_NOW"; readonly at: number; readonly by: string; readonly reason: string }

/** Backoff between settlement attempts: 2 s, 4 s, 8 s ... capped at 5 minutes. */
export const settlementBackoffMs = (attempts: number) => Math.min(2_000 * 2 ** Math.max(0, attempts - 1), 300_000)

export const settlementMachine = setup({
  types: {
    context: {} as SettlementContext,
    events: {} as SettlementEvent,
    input: {} as Record<string, never>
  },
  actions: {
    /** Host: the purpose's effects of a settled payment (book it, activate, release...). */
    onSettled: (_, _params: { readonly txHash: string }) => {},
    /** Host: undo the purpose's reservation (the money never arrived). */
    onFailed: (_, _params: { readonly reason: string }) => {},
    /** Host: persist when to try again (the recovery worker's due time). */
    scheduleRetry: (_, _params: { readonly at: number }) => {},
    noteTxHash: assign({ txHash: ({ event }) => (event.type === "SETTLED" ? event.txHash : null) }),
    noteReason: assign({ reason: ({ event }) => (event.type === "FAILED_FINAL" || event.type === "UNUSED" ? event.reason : null) })
  }
}).createMachine({
  id: "settlement",
  initial: "reserved",
  context: { attempts: 0, nextAttemptAt: null, txHash: null, reason: null },
  states: {
    reserved: {
      on: {
        // Settled or failed for good: accepted from the live states only, so repeats after the end change nothing.
        SETTLED: { target: "settled", actions: ["noteTxHash", { type: "onSettled", params: ({ event }) => ({ txHash: event.txHash }) }] },
        FAILED_FINAL: { target: "failed", actions: ["noteReason", { type: "onFailed", params: ({ event }) => ({ reason: event.reason }) }] },
        UNUSED: { target: "failed", actions: ["noteReason", { type: "onFailed", params: ({ event }) => ({ reason: event.reason }) }] },
        FAILED_TRANSIENT: {
          target: "retrying",
          actions: [
            assign({
              attempts: ({ context }) => context.attempts + 1,
              nextAttemptAt: ({ context, event }) => event.at + settlementBackoffMs(context.attempts + 1),
              reason: ({ event }) => event.error
            }),
            { type: "scheduleRetry", params: ({ context }) => ({ at: context.nextAttemptAt ?? 0 }) }
          ]
        }
      }
    },
    retrying: {
      on: {
        SETTLED: { target: "settled", actions: ["noteTxHash", { type: "onSettled", params: ({ event }) => ({ txHash: event.txHash }) }] },
        FAILED_FINAL: { target: "failed", actions: ["noteReason", { type: "onFailed", params: ({ event }) => ({ reason: event.reason }) }] },
        UNUSED: { target: "failed", actions: ["noteReason", { type: "onFailed", params: ({ event }) => ({ reason: event.reason }) }] },
        RETRY_DUE: "reserved",
        RETRY_NOW: "reserved"
      }
    },
    // Final: late events (a second SETTLED from recovery) are not accepted, so they change nothing.
    settled: { type: "final" },
    failed: { type: "final" }
  }
})
