// One transaction the treasury signs (a settlement, a refund, a withdrawal, a gap fill): signed and stored with its
// nonce before it is broadcast, then included in a block (`mined`: its purpose books it then), final once
// CHAIN_CONFIRMATIONS blocks hold it (`confirmed`, or `reverted`), or dropped (its nonce was taken by another
// transaction). A reorg that takes an included transaction away before it is final sends its stored bytes again
// (`reorged`); its booking stands, because the same bytes do the same thing when they are mined again.
import { assign, setup } from "xstate"

export interface TreasuryTxContext {
  readonly broadcasts: number
  readonly lastError: string | null
  /** How many times the bytes were re-signed with higher fees (absent in snapshots from before replacements). */
  readonly replacements?: number
  /** The receipt's status when last included (absent in snapshots from before finality was tracked). */
  readonly success?: boolean
  /** How many times a reorg took the transaction out of the chain after it was included. */
  readonly reorgs?: number
}

export type TreasuryTxEvent =
  /** The signed bytes reached a node (again: rebroadcasts after a crash or an RPC fault send the same bytes). */
  | { readonly type: "BROADCAST"; readonly at: number }
  | { readonly type: "BROADCAST_FAILED"; readonly at: number; readonly error: string }
  /**
   * Included in `block`: `success` is the receipt's status; `final` when the block is already CHAIN_CONFIRMATIONS
   * deep (always with one confirmation: a devnet). Events from before finality was tracked have no `final`: final.
   */
  | { readonly type: "MINED"; readonly at: number; readonly success: boolean; readonly block: string; readonly final?: boolean }
  /** The block holding it is CHAIN_CONFIRMATIONS deep. */
  | { readonly type: "FINALIZED"; readonly at: number; readonly block: string }
  /** The chain no longer has it (a reorg replaced its block): its bytes are sent again. */
  | { readonly type: "REORGED"; readonly at: number; readonly block: string }
  /** The nonce was used by another transaction (a gap fill or a replacement): these bytes can never be mined. */
  | { readonly type: "DROPPED"; readonly at: number; readonly reason: string }
  /** Re-signed at the same nonce with higher fees (the chain's fees rose past the ones signed); the new bytes were sent. */
  | { readonly type: "REPLACED"; readonly at: number; readonly hash: string; readonly maxFeePerGas: string; readonly reason: string }

const finalNow = ({ event }: { event: TreasuryTxEvent }) => event.type === "MINED" && event.final !== false
const succeeded = ({ event }: { event: TreasuryTxEvent }) => event.type === "MINED" && event.success

/** Where a MINED event leads from any unfinished state. */
const mined = [
  { guard: ({ event }: { event: TreasuryTxEvent }) => finalNow({ event }) && succeeded({ event }), target: "confirmed", actions: "noteOutcome" },
  { guard: finalNow, target: "reverted", actions: "noteOutcome" },
  { target: "mined", actions: "noteOutcome" }
] as const

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
    }),
    noteOutcome: assign({ success: ({ event, context }) => (event.type === "MINED" ? event.success : context.success) }),
    countReorg: assign({
      reorgs: ({ context }) => (context.reorgs ?? 0) + 1,
      lastError: ({ event }) => (event.type === "REORGED" ? `taken out of block ${event.block} by a reorg: sent again` : null)
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
        MINED: mined,
        DROPPED: "dropped"
      }
    },
    broadcast: {
      on: {
        BROADCAST: "broadcast",
        BROADCAST_FAILED: "broadcast",
        REPLACED: { target: "broadcast", actions: "countReplacement" },
        MINED: mined,
        DROPPED: "dropped"
      }
    },
    /** Included and booked; not final until CHAIN_CONFIRMATIONS blocks hold it. */
    mined: {
      on: {
        FINALIZED: [{ guard: ({ context }) => context.success !== false, target: "confirmed" }, { target: "reverted" }],
        REORGED: { target: "reorged", actions: "countReorg" },
        // Included again in another block (a reorg that kept it): it waits for that block's depth.
        MINED: mined
      }
    },
    /** Booked, then taken out by a reorg: its stored bytes are sent again until they are included again. */
    reorged: {
      on: {
        BROADCAST: "reorged",
        BROADCAST_FAILED: "reorged",
        REPLACED: { target: "reorged", actions: "countReplacement" },
        MINED: mined,
        DROPPED: "dropped"
      }
    },
    confirmed: { type: "final" },
    reverted: { type: "final" },
    dropped: { type: "final" }
  }
})
