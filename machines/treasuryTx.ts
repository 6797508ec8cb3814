// One transaction the treasury signs (a settlement, a refund, later withdrawals and payouts): signed and stored with its
// nonce before it is broadcast, then mined (confirmed or reverted) or dropped (its nonce was taken by another transaction).
import { assign, setup } from "xstate"

export interface TreasuryTxContext {
  readonly broadcasts: number
  readonly lastError: string | null
  /** How many times the bytes were re-signed with higher fees (absent in snapshots from before replacements). */
  readonly replacements?: number
}

export type TreasuryTxEvent =
  /** The signed bytes reached a node (again: rebroadcasts after a crash or an RPC fault send the same bytes). */
  | { readonly type: "BROADCAST"; readonly at: number }
  | { readonly type: "BROADCAST_FAILED"; readonly at: number; readonly error: string }
  /** Mined: `success` is the receipt's status. */
  | { readonly type: "MINED"; readonly at: number; readonly success: boolean; readonly block: string }
  /** The nonce was used by another transaction (a gap fill or a replacement): these bytes can never be mined. */
  | { readonly type: "DROPPED"; readonly at: number; readonly reason: string }
  /** Re-signed at the same nonce with higher fees (the chain's fees rose past the ones signed); the new bytes were sent. */
  | { readonly type: "REPLACED"; readonly at: number; readonly hash: string; readonly maxFeePerGas: string; readonly reason: string }

export const treasuryTxMachine = setup({
  types: {
    context: {} as TreasuryTxContext,
    events: {} as TreasuryTxEvent,
    input: {} as Record<string, never>
  },
  actions: {
    countReplacement: assign({
      replacements: ({ context }) => (context.replacements ?? 0) + 1,
      lastError: ({ event }) => (event.type === "REPLACED" ? event.reason : null)
    })
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
        REPLACED: { target: "broadcast", actions: "countReplacement" },
        MINED: [{ guard: ({ event }) => event.success, target: "confirmed" }, { target: "reverted" }],
        DROPPED: "dropped"
      }
    },
    broadcast: {
      on: {
        BROADCAST: "broadcast",
        BROADCAST_FAILED: "broadcast",
        REPLACED: { target: "broadcast", actions: "countReplacement" },
        MINED: [{ guard: ({ event }) => event.success, target: "confirmed" }, { target: "reverted" }],
        DROPPED: "dropped"
      }
    },
    confirmed: { type: "final" },
    reverted: { type: "final" },
    dropped: { type: "final" }
  }
})
