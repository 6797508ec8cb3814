// A payer's dispute of a paid execution: open (the money frozen; the agent has 48 hours to respond) → escalated when it
// did not → resolved_agent, resolved_client or resolved_split by the platform, which moves the frozen money.
import { assign, setup } from "xstate"

export type Resolution = "resolved_agent" | "resolved_client" | "resolved_split"

export interface DisputeContext {
  readonly respondBy: number
  readonly responded: boolean
}

export type DisputeEvent =
  | { readonly type: "AGENT_RESPONDED"; readonly at: number }
  /** The durable timer at respondBy. */
  | { readonly type: "RESPONSE_DUE"; readonly at: number }
  /** The platform's decision; `clientShare` is what goes back to the payer, in micro-USDC (decimal digits). */
  | {
    readonly type: "RESOLVE"
    readonly at: number
    readonly resolution: Resolution
    readonly clientShare: string
    readonly notes: string
    readonly by: string
  }

/** What goes back to the payer: from the RESOLVE event (zero when the agent won). */
const clientShare = ({ event }: { readonly event: DisputeEvent }) => ({ clientShare: event.type === "RESOLVE" ? event.clientShare : "0" })

/** The platform's decision, accepted while the dispute is open or escalated (the final states take no events). */
const resolve = [
  {
    guard: "agentWins",
    target: "resolved_agent",
    actions: [
      { type: "settle", params: { clientShare: "0" } },
      { type: "adjustReputation", params: { delta: 2 } },
      { type: "announceResolution", params: { resolution: "resolved_agent", reputationDelta: 2 } }
    ]
  },
  {
    guard: "clientWins",
    target: "resolved_client",
    actions: [
      { type: "settle", params: clientShare },
      { type: "adjustReputation", params: { delta: -5 } },
      { type: "announceResolution", params: { resolution: "resolved_client", reputationDelta: -5 } }
    ]
  },
  {
    target: "resolved_split",
    actions: [
      { type: "settle", params: clientShare },
      { type: "announceResolution", params: { resolution: "resolved_split", reputationDelta: 0 } }
    ]
  }
] as const

export const disputeMachine = setup({
  types: {
    context: {} as DisputeContext,
    events: {} as DisputeEvent,
    input: {} as { readonly respondBy: number }
  },
  actions: {
    /** Host: the durable timer that escalates an unanswered dispute. */
    scheduleResponseDue: (_, _params: { readonly at: number }) => {},
    cancelResponseDue: () => {},
    /** Host: timeline entry `escalated`. */
    recordEscalation: () => {},
    /** Host: the execution's frozen money to the agent, the payer or both (its machine, same transaction). */
    settle: (_, _params: { readonly clientShare: string }) => {},
    /** Host: reputation +2 (agent won) or -5 (client won); none for a split. */
    adjustReputation: (_, _params: { readonly delta: number }) => {},
    /** Host: timeline entry `resolved` and dispute.resolved. */
    announceResolution: (_, _params: { readonly resolution: Resolution; readonly reputationDelta: number }) => {},
    noteResponse: assign({ responded: true })
  },
  guards: {
    unanswered: ({ context }) => !context.responded,
    agentWins: ({ event }) => event.type === "RESOLVE" && event.resolution === "resolved_agent",
    clientWins: ({ event }) => event.type === "RESOLVE" && event.resolution === "resolved_client"
  }
}).createMachine({
  id: "dispute",
  initial: "open",
  context: ({ input }) => ({ respondBy: input.respondBy, responded: false }),
  states: {
    open: {
      entry: { type: "scheduleResponseDue", params: ({ context }) => ({ at: context.respondBy }) },
      on: {
        AGENT_RESPONDED: { actions: ["noteResponse", "cancelResponseDue"] },
        RESPONSE_DUE: { guard: "unanswered", target: "escalated" },
        RESOLVE: resolve
      }
    },
    escalated: {
      entry: "recordEscalation",
      on: { AGENT_RESPONDED: { actions: "noteResponse" }, RESOLVE: resolve }
    },
    resolved_agent: { type: "final" },
    resolved_client: { type: "final" },
    resolved_split: { type: "final" }
  }
})
