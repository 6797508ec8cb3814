// One paid execution: the agent call, its retries within a window, and where the held payment goes
// (released to agent and platform, refunded to the payer, or voided when it never settled).
import { assign, setup } from "xstate"
import type { DisputeRefundTo, ExecutionContext, ExecutionEvent, PaymentStatus, TimerEvent } from "./executionModel.js"

export type { ExecutionContext, ExecutionEvent, PaymentStatus, TimerEvent } from "./executionModel.js"
export { executionStatus } from "./executionModel.js"

/** A failed attempt: open the retry window (first failure only), count it, and arm the window's timer. */
const failure = [
  "openRetryWindow",
  { type: "recordOutcome", params: { success: false } },
  { type: "queueScore", params: { success: false } },
  { type: "scheduleTimer", params: ({ context }: { readonly context: ExecutionContext }) => ({ event: "RETRY_WINDOW_CLOSED" as const, at: context.retryUntil ?? 0 }) }
] as const

/** A failed sub-call inside a chain: heard at once, its reservation back in the chain's budget; never retried. */
const giveBack = [
  { type: "recordOutcome", params: { success: false } },
  // Paid from the start (the budget): the outcome counts at once (for health; a sub-call never moves reputation).
  { type: "scoreOutcomes", params: { outcomes: [false] } },
  "returnToChain"
] as const

/** A failed call paid from credit: heard at once, its price back in the payer's credit; never retried. */
const giveBackCredit = [
  { type: "recordOutcome", params: { success: false } },
  { type: "scoreOutcomes", params: { outcomes: [false] } },
  "returnToCredit"
] as const

export const executionMachine = setup({
  types: {
    context: {} as ExecutionContext,
    events: {} as ExecutionEvent,
    input: {} as { readonly retryWindowMs: number; readonly deadlineMs: number; readonly startedAt: number; readonly chained?: boolean; readonly credit?: boolean }
  },
  actions: {
    /** Host: outbox execution.completed / execution.failed (the client and the agent hear at once). */
    recordOutcome: (_, _params: { readonly success: boolean }) => {},
    /**
     * Host: reputation, health and trust counters (root executions), only for outcomes whose payment settled: an
     * outcome nobody paid for (a front-run or drained authorization) can never farm or sink a score.
     */
    scoreOutcomes: (_, _params: { readonly outcomes: ReadonlyArray<boolean> }) => {},
    /** Host: persist a durable timer that sends `event` at `at`. */
    scheduleTimer: (_, _params: { readonly event: TimerEvent; readonly at: number }) => {},
    /** Host: drop the pending durable timer for `event` (its deadline no longer matters). */
    cancelTimer: (_, _params: { readonly event: TimerEvent }) => {},
    /** Host: escrow → platform revenue (fee + cut) and agent available (earnings). */
    releaseEscrow: () => {},
    /** Host: escrow → refunds payable, and queue the on-chain refund. */
    startRefund: () => {},
    /** Host: the escrow is refunded (the refund booked its own treasury movement when its transfer was mined). */
    confirmRefund: (_, _params: { readonly txHash: string }) => {},
    /** Host: the execution's pending refund is due now (the refund worker sends it on its next pass). */
    retryRefund: () => {},
    /** Host: escrow → settlement receivable (the payment never arrived, nothing to pay out). */
    voidEscrow: () => {},
    /** Host: escrow → the chain's budget (a failed sub-call's reservation is the chain's to spend again). */
    returnToChain: () => {},
    /** Host: escrow → the payer's credit (a failed call paid from credit). */
    returnToCredit: () => {},
    /** Host: the money into disputes held: from the escrow, or taken back from the agent and platform when released. */
    freezeForDispute: (_, _params: { readonly released: boolean }) => {},
    /**
     * Host: disputes held → the client's share (refunds payable with a refund queued; or back into the channel's
     * receivable, off the unclaimed charge; or against the channel's write-off) and the rest released.
     */
    settleDispute: (_, _params: { readonly clientShare: string; readonly refundTo?: DisputeRefundTo }) => {},
    /** The first failure opens the retry window; retries do not extend it. */
    openRetryWindow: assign({ retryUntil: ({ context, event }) => context.retryUntil ?? event.at + context.retryWindowMs }),
    startAttempt: assign({ attempts: ({ context }) => context.attempts + 1, startedAt: ({ event }) => event.at }),
    markSettled: assign({ payment: "settled" as PaymentStatus }),
    queueScore: assign({ unscored: ({ context }, params: { readonly success: boolean }) => [...context.unscored, params.success] }),
    clearScores: assign({ unscored: [] }),
    markPaymentFailed: assign({ payment: "failed" as PaymentStatus })
  },
  guards: {
    chained: ({ context }) => context.chained,
    credited: ({ context }) => context.credit,
    timedOut: ({ event }) => event.type === "AGENT_DEADLINE" || (event.type === "AGENT_FAILED" && event.timedOut),
    canRetry: ({ context, event }) =>
      context.payment !== "failed" && !context.windowClosed && context.retryUntil !== null && event.at < context.retryUntil,
    paymentSettled: ({ context }) => context.payment === "settled",
    paymentFailed: ({ context }) => context.payment === "failed",
    refundDue: ({ context }) => context.windowClosed && context.payment === "settled",
    releaseNow: ({ context }) => context.releaseDelayMs <= 0 && !context.frozen,
    releasable: ({ context }) => !context.frozen,
    frozen: ({ context }) => context.frozen,
    scoreDue: ({ context }) => context.payment === "settled" && context.unscored.length > 0,
    nothingToRefund: ({ event }) => event.type === "DISPUTE_RESOLVED" && event.clientShare === "0",
    /** The client's share is settled in the step itself (a channel's charge lowered): no transfer to wait for. */
    refundedInPlace: ({ event }) => event.type === "DISPUTE_RESOLVED" && event.refundTo !== undefined
  }
}).createMachine({
  id: "execution",
  initial: "running",
  context: ({ input }) => ({
    retryWindowMs: input.retryWindowMs,
    deadlineMs: input.deadlineMs,
    startedAt: input.startedAt,
    attempts: 1,
    retryUntil: null,
    failureKind: null,
    payment: "pending",
    windowClosed: false,
    completedAt: null,
    unscored: [],
    releaseDelayMs: 0,
    releaseAt: null,
    chained: input.chained === true,
    credit: input.credit === true,
    frozen: false
  }),
  on: {
    PAYMENT_SETTLED: { actions: "markSettled" },
    PAYMENT_FAILED: { actions: "markPaymentFailed" }
  },
  // Outcomes count once their payment settled (at once when it already had).
  always: {
    guard: "scoreDue",
    actions: [{ type: "scoreOutcomes", params: ({ context }) => ({ outcomes: context.unscored }) }, "clearScores"]
  },
  states: {
    running: {
      entry: { type: "scheduleTimer", params: ({ context }) => ({ event: "AGENT_DEADLINE", at: context.startedAt + context.deadlineMs }) },
      exit: { type: "cancelTimer", params: { event: "AGENT_DEADLINE" } },
      on: {
        AGENT_SUCCEEDED: {
          target: "completed",
          actions: [
            assign({ completedAt: ({ event }) => event.at, releaseDelayMs: ({ event }) => event.releaseDelayMs }),
            { type: "recordOutcome", params: { success: true } },
            { type: "queueScore", params: { success: true } }
          ]
        },
        AGENT_FAILED: [
          { guard: "chained", target: "returned", actions: [assign({ failureKind: ({ event }) => (event.timedOut ? "timeout" : "failed") }), ...giveBack] },
          { guard: "credited", target: "returned", actions: [assign({ failureKind: ({ event }) => (event.timedOut ? "timeout" : "failed") }), ...giveBackCredit] },
          { guard: "timedOut", target: "timeout", actions: [assign({ failureKind: "timeout" }), ...failure] },
          { target: "failed", actions: [assign({ failureKind: "failed" }), ...failure] }
        ],
        AGENT_DEADLINE: [
          { guard: "chained", target: "returned", actions: [assign({ failureKind: "timeout" }), ...giveBack] },
          { guard: "credited", target: "returned", actions: [assign({ failureKind: "timeout" }), ...giveBackCredit] },
          { target: "timeout", actions: [assign({ failureKind: "timeout" }), ...failure] }
        ]
      }
    },
    completed: {
      initial: "awaitingPayment",
      states: {
        // The output is released only once the payment settled.
        awaitingPayment: {
          always: [
            { guard: "paymentSettled", target: "releasing" },
            { guard: "paymentFailed", target: "unpaid" }
          ]
        },
        releasing: {
          always: [
            { guard: "releaseNow", target: "released", actions: "releaseEscrow" },
            {
              target: "held",
              actions: [
                assign({ releaseAt: ({ context }) => (context.completedAt ?? 0) + context.releaseDelayMs }),
                { type: "scheduleTimer", params: ({ context }) => ({ event: "RELEASE_DUE", at: context.releaseAt ?? 0 }) }
              ]
            }
          ]
        },
        held: {
          on: {
            // Refused while the agent is suspended (the timer is spent); reinstatement arms it again.
            RELEASE_DUE: { guard: "releasable", target: "released", actions: "releaseEscrow" },
            AGENT_REINSTATED: {
              guard: "releasable",
              actions: { type: "scheduleTimer", params: ({ context, event }) => ({ event: "RELEASE_DUE", at: context.releaseAt ?? event.at }) }
            },
            // Only while frozen (the agent suspended): the operator decides the money goes back; refunding's entry queues it.
            OPERATOR_REFUND: { guard: "frozen", target: "#execution.refunding", actions: { type: "cancelTimer", params: { event: "RELEASE_DUE" } } },
            DISPUTE_OPENED: {
              target: "disputed",
              actions: [{ type: "cancelTimer", params: { event: "RELEASE_DUE" } }, { type: "freezeForDispute", params: { released: false } }]
            }
          }
        },
        released: {
          on: { DISPUTE_OPENED: { target: "disputed", actions: { type: "freezeForDispute", params: { released: true } } } }
        },
        // The money sits in disputes held until the platform decides.
        disputed: {
          on: {
            DISPUTE_RESOLVED: [
              { guard: "nothingToRefund", target: "resolved", actions: { type: "settleDispute", params: { clientShare: "0" } } },
              {
                guard: "refundedInPlace",
                target: "resolved",
                actions: {
                  type: "settleDispute",
                  params: ({ event }) => ({ clientShare: event.clientShare, ...(event.refundTo === undefined ? {} : { refundTo: event.refundTo }) })
                }
              },
              { target: "refundingDispute", actions: { type: "settleDispute", params: ({ event }) => ({ clientShare: event.clientShare }) } }
            ]
          }
        },
        refundingDispute: {
          on: {
            REFUND_CONFIRMED: { target: "resolved", actions: { type: "confirmRefund", params: ({ event }) => ({ txHash: event.txHash }) } },
            REFUND_RETRY: { actions: "retryRefund" }
          }
        },
        resolved: {},
        unpaid: { entry: "voidEscrow" }
      }
    },
    failed: {
      always: [{ guard: "refundDue", target: "refunding" }, { guard: "paymentFailed", target: "cancelled" }],
      on: {
        RETRY: { guard: "canRetry", target: "running", actions: "startAttempt" },
        RETRY_WINDOW_CLOSED: { actions: assign({ windowClosed: true }) }
      }
    },
    timeout: {
      always: [{ guard: "refundDue", target: "refunding" }, { guard: "paymentFailed", target: "cancelled" }],
      on: {
        RETRY: { guard: "canRetry", target: "running", actions: "startAttempt" },
        RETRY_WINDOW_CLOSED: { actions: assign({ windowClosed: true }) }
      }
    },
    refunding: {
      entry: "startRefund",
      on: {
        REFUND_CONFIRMED: { target: "refunded", actions: { type: "confirmRefund", params: ({ event }) => ({ txHash: event.txHash }) } },
        REFUND_RETRY: { actions: "retryRefund" }
      }
    },
    refunded: { type: "final" },
    /** A failed sub-call (or call paid from credit): its reservation went back to the chain's budget (or the credit). */
    returned: { type: "final" },
    /** Failed, and the payment never settled: nothing to refund. */
    cancelled: { type: "final", entry: "voidEscrow" }
  }
})
