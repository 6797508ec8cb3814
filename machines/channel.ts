// A payer's x402 batch-settlement channel with our treasury as receiver: depositPending (the deposit is sent, not yet
// included) → open (paid calls charge vouchers against it) → withdrawing (the payer started a withdrawal: no new
// charges, claim what is charged before it can be finalized) → drained (nothing the payer can still spend with us;
// claimed money may wait for its settle) → closed; a new deposit into a drained or closed channel opens it again. A claim that fails parks the channel in claimFailed until a claim
// lands; a deposit that never lands ends in depositFailed. Charges themselves are not events: they are the one-statement
// compare-and-set on the channel row (services/channels/Repo.ts), allowed only while the row's state is `open`.
import { assign, setup } from "xstate"

export interface ChannelContext {
  /** The payer asked to withdraw (ms); the claim must land before `finalizableAt`. */
  readonly withdrawRequestedAt: number | null
  readonly finalizableAt: number | null
  readonly claims: number
  readonly lastError: string | null
}

export type ChannelEvent =
  /** A deposit (the first or a top-up) is included in a block; `balance` is the channel's on-chain balance after it. */
  | { readonly type: "DEPOSIT_INCLUDED"; readonly at: number; readonly txHash: string; readonly balance: string }
  /** The first deposit reverted or expired: the channel never opened. */
  | { readonly type: "DEPOSIT_FAILED"; readonly at: number; readonly reason: string }
  /** The contract's WithdrawInitiated log for this channel: the payer may finalize at `finalizableAt`. */
  | { readonly type: "WITHDRAW_INITIATED"; readonly at: number; readonly finalizableAt: number }
  /** A claim transaction moved the channel's totalClaimed to `totalClaimed` on chain. */
  | { readonly type: "CLAIMED"; readonly at: number; readonly txHash: string; readonly totalClaimed: string }
  /** A claim transaction reverted or was refused: the charged amount is still only a receivable. */
  | { readonly type: "CLAIM_FAILED"; readonly at: number; readonly reason: string }
  /** A settle moved claimed money to the receiver (our treasury); `unsettled` is what stays claimed but unsettled. */
  | {
    readonly type: "SETTLED"
    readonly at: number
    readonly txHash: string
    readonly amount: string
    readonly unsettled: string
    /** The block the settle was mined in: its booking counts from there (the reconciliation compares at a block). */
    readonly block?: string
  }
  /**
   * The receiver refunded `amount` of the unclaimed balance to the payer (a cooperative refund). `balance`: the channel's
   * on-chain balance after it; `left`: what of it is still unclaimed. A refund that leaves something unclaimed is partial:
   * the channel stays where it was; otherwise (or without `left`, as recorded before partial refunds) the payer left.
   */
  | {
    readonly type: "REFUNDED"
    readonly at: number
    readonly txHash: string
    readonly amount: string
    readonly unsettled: string
    readonly balance?: string
    readonly left?: string
  }
  /** The payer finalized the withdrawal: the unclaimed balance went back to the payer. */
  | { readonly type: "WITHDRAW_FINALIZED"; readonly at: number; readonly txHash: string; readonly amount: string; readonly unsettled: string }

/** Nothing claimed waits for its settle: the channel can close at once. */
const allSettled = ({ event }: { readonly event: ChannelEvent }) => "unsettled" in event && event.unsettled === "0"

/** A partial refund: the payer took back part of the unclaimed balance and can still pay from the rest. */
const partial = ({ event }: { readonly event: ChannelEvent }) =>
  event.type === "REFUNDED" && event.left !== undefined && event.balance !== undefined && BigInt(event.left) > 0n

/** The chain's balance after a refund, when the event carries it. */
const balanceAfterRefund = ({ event }: { readonly event: ChannelEvent }) => ({ balance: event.type === "REFUNDED" ? event.balance ?? null : null })

/** A partial refund keeps the state; the row's balance mirror comes down to the chain's. */
const refundedPart = { guard: "partial" as const, actions: { type: "setBalance" as const, params: balanceAfterRefund } }

/**
 * A deposit into a channel the payer had left (the official client deposits again into the same channel after a full
 * refund): it opens again, its cumulative figures going on from where they were, its balance the chain's.
 */
const reopen = {
  target: "open" as const,
  actions: [
    { type: "setBalance" as const, params: ({ event }: { readonly event: ChannelEvent }) => ({ balance: event.type === "DEPOSIT_INCLUDED" ? event.balance : null }) },
    { type: "announce" as const, params: { outcome: "opened" as const } }
  ]
}

export const channelMachine = setup({
  types: {
    context: {} as ChannelContext,
    events: {} as ChannelEvent,
    input: {} as Record<string, never>
  },
  actions: {
    /** Host: the row's balance mirror takes the on-chain balance. */
    mirrorBalance: (_, _params: { readonly balance: string }) => {},
    /** Host: the row's balance mirror takes the chain's figure as it is (after a refund; a deposit reopening the channel). */
    setBalance: (_, _params: { readonly balance: string | null }) => {},
    /** Host: a durable timer so that a claim of everything charged lands before the payer can finalize. */
    claimBefore: (_, _params: { readonly at: number }) => {},
    /** Host: the claimed amount moves from the channel's receivable to claimed-unsettled (ledger, same transaction). */
    bookClaim: (_, _params: { readonly totalClaimed: string }) => {},
    /** Host: the settled amount moves to the treasury (ledger, same transaction). */
    bookSettle: (_, _params: { readonly amount: string }) => {},
    /** Host: charged but never claimed when the payer's money left the channel: written off, the agents' shares reversed. */
    writeOffUnclaimed: (_, _params: { readonly reason: "withdrawn" | "refunded" }) => {},
    /** Host: the operator's attention (a claim failed; the payer's withdrawal clock runs). */
    raiseAttention: (_, _params: { readonly reason: string }) => {},
    /** Host: channel.opened / channel.closed ... */
    announce: (_, _params: { readonly outcome: "opened" | "withdrawing" | "drained" | "closed" | "failed" }) => {},
    noteWithdraw: assign({
      withdrawRequestedAt: ({ event }) => event.at,
      finalizableAt: ({ event }) => (event.type === "WITHDRAW_INITIATED" ? event.finalizableAt : null)
    }),
    countClaim: assign({ claims: ({ context }) => context.claims + 1, lastError: null }),
    noteError: assign({ lastError: ({ event }) => ("reason" in event ? event.reason : null) })
  },
  guards: {
    allSettled,
    partial,
    withdrawing: ({ context }) => context.withdrawRequestedAt !== null
  }
}).createMachine({
  id: "channel",
  initial: "depositPending",
  context: { withdrawRequestedAt: null, finalizableAt: null, claims: 0, lastError: null },
  states: {
    depositPending: {
      on: {
        DEPOSIT_INCLUDED: {
          target: "open",
          actions: [
            { type: "mirrorBalance", params: ({ event }) => ({ balance: event.balance }) },
            { type: "announce", params: { outcome: "opened" } }
          ]
        },
        DEPOSIT_FAILED: { target: "depositFailed", actions: "noteError" }
      }
    },
    open: {
      on: {
        // A top-up: the ceiling for charges rises.
        DEPOSIT_INCLUDED: { actions: { type: "mirrorBalance", params: ({ event }) => ({ balance: event.balance }) } },
        WITHDRAW_INITIATED: {
          target: "withdrawing",
          actions: [
            "noteWithdraw",
            { type: "claimBefore", params: ({ event }) => ({ at: event.finalizableAt }) },
            { type: "announce", params: { outcome: "withdrawing" } }
          ]
        },
        CLAIMED: { actions: ["countClaim", { type: "bookClaim", params: ({ event }) => ({ totalClaimed: event.totalClaimed }) }] },
        CLAIM_FAILED: "claimFailed",
        SETTLED: { actions: { type: "bookSettle", params: ({ event }) => ({ amount: event.amount }) } },
        REFUNDED: [refundedPart, ...leave("refunded")]
      }
    },
    withdrawing: {
      on: {
        // A deposit sent while the channel was open and included after the payer started withdrawing: its money is in
        // the channel (the withdrawal may take it back); the mirror follows the chain.
        DEPOSIT_INCLUDED: { actions: { type: "mirrorBalance", params: ({ event }) => ({ balance: event.balance }) } },
        CLAIMED: { actions: ["countClaim", { type: "bookClaim", params: ({ event }) => ({ totalClaimed: event.totalClaimed }) }] },
        CLAIM_FAILED: "claimFailed",
        SETTLED: { actions: { type: "bookSettle", params: ({ event }) => ({ amount: event.amount }) } },
        REFUNDED: [refundedPart, ...leave("refunded")],
        WITHDRAW_FINALIZED: leave("withdrawn")
      }
    },
    /** A problem state: what is charged is not claimed; a later claim brings the channel back where it was. */
    claimFailed: {
      entry: ["noteError", { type: "raiseAttention", params: ({ event }) => ({ reason: "reason" in event ? event.reason : "claim failed" }) }],
      on: {
        CLAIMED: [
          {
            guard: "withdrawing",
            target: "withdrawing",
            actions: ["countClaim", { type: "bookClaim", params: ({ event }) => ({ totalClaimed: event.totalClaimed }) }]
          },
          { target: "open", actions: ["countClaim", { type: "bookClaim", params: ({ event }) => ({ totalClaimed: event.totalClaimed }) }] }
        ],
        CLAIM_FAILED: { actions: "noteError" },
        DEPOSIT_INCLUDED: { actions: { type: "mirrorBalance", params: ({ event }) => ({ balance: event.balance }) } },
        WITHDRAW_INITIATED: {
          actions: ["noteWithdraw", { type: "claimBefore", params: ({ event }) => ({ at: event.finalizableAt }) }]
        },
        SETTLED: { actions: { type: "bookSettle", params: ({ event }) => ({ amount: event.amount }) } },
        REFUNDED: [refundedPart, ...leave("refunded")],
        WITHDRAW_FINALIZED: leave("withdrawn")
      }
    },
    /** The payer's money left the channel; claimed money may still wait for its settle. */
    drained: {
      entry: { type: "announce", params: { outcome: "drained" } },
      on: {
        DEPOSIT_INCLUDED: reopen,
        SETTLED: [
          { guard: "allSettled", target: "closed", actions: { type: "bookSettle", params: ({ event }) => ({ amount: event.amount }) } },
          { actions: { type: "bookSettle", params: ({ event }) => ({ amount: event.amount }) } }
        ]
      }
    },
    /** Nothing left with us; a new deposit into the same channel opens it again. */
    closed: { entry: { type: "announce", params: { outcome: "closed" } }, on: { DEPOSIT_INCLUDED: reopen } },
    depositFailed: { type: "final", entry: { type: "announce", params: { outcome: "failed" } } }
  }
})

/** The payer's money leaves (refund or finalized withdrawal): write off what was never claimed, then drain or close. */
function leave(reason: "withdrawn" | "refunded") {
  const actions = [{ type: "writeOffUnclaimed" as const, params: { reason } }, { type: "setBalance" as const, params: balanceAfterRefund }]
  return [
    { guard: ({ event }: { readonly event: ChannelEvent }) => allSettled({ event }), target: "closed", actions },
    { target: "drained", actions }
  ]
}
