// One transaction the treasury signs (a settlement, a refund, later withdrawals and payouts): signed and stored with its
// nonce before it is broadcast, then mined (confirmed or reverted) or dropped (its nonce was taken by another transaction).
import { setup } from "xstate"

export interface TreasuryTxContext {
  readonly broadcasts: number
  readonly lastError: string | null
}

export type TreasuryTxEvent =
  /** The signed bytes reached a node (again: rebroadcasts after a crash or an RPC fault send the same bytes). */
  | { readonly type: "BROADCAST"; readonly at: number }
  | { readonly type: "BROADCAST_FAILED"; readonly at: number; readonly error: string }
  /** Mined: `success` is the receipt's status. */
  | { readonly type: "MINED"; readonly at: number; readonly success: boolean; readonly block: string }
  /** The nonce was used by another transaction (a gap fill or a replacement): these bytes can never be mined. */
  | { readonly type: "DROPPED"; readonly at: number; readonly reason: string }

export const treasuryTxMachine = setup({
  types: {
    context: {} as TreasuryTxContext,
    events: {} as TreasuryTxEvent,
    input: {} as Record<string, never>
  }
}).createMachine({
  id: "treasuryTx",
  initial: "signed",
  context: { broadcasts: 0, lastError: null },
  states: {
    signed: {
      on: {
        BROADCAST: "broadcast",
        BROADCAST_FAILED: "signed",
        MINED: [{ guard: ({ event }) => event.success, target: "confirmed" }, { target: "reverted" }],
        DROPPED: "dropped"
      }
    },
    broadcast: {
      on: {
        BROADCAST: "broadcast",
        BROADCAST_FAILED: "broadcast",
        MINED: [{ guard: ({ event }) => event.success, target: "confirmed" }, { target: "reverted" }],
        DROPPED: "dropped"
      }
    },
    confirmed: { type: "final" },
    reverted: { type: "final" },
    dropped: { type: "final" }
  }
})
