// One machine kind: its state diagram (from the XState definition) with live counts, then the actors in the chosen state.
import type { AnyStateMachine } from "xstate"
import { chainMachine } from "../../../machines/chain.js"
import { channelMachine } from "../../../machines/channel.js"
import { circuitMachine } from "../../../machines/circuit.js"
import { disputeMachine } from "../../../machines/dispute.js"
import { executionMachine } from "../../../machines/execution.js"
import type { MachineKind } from "../../../machines/Host.js"
import { settlementMachine } from "../../../machines/settlement.js"
import { treasuryTxMachine } from "../../../machines/treasuryTx.js"
import { deliveryMachine } from "../../../machines/webhookDelivery.js"
import { withdrawalMachine } from "../../../machines/withdrawal.js"
import { diagramSvg, machineGraph } from "../diagram.js"
import { field, when } from "../format.js"
import { type Html, html, opsPath } from "../html.js"
import type { ActorList, Counts } from "./types.js"

export const MACHINES: { readonly [K in MachineKind]: AnyStateMachine } = {
  execution: executionMachine,
  settlement: settlementMachine,
  circuit: circuitMachine,
  treasury: treasuryTxMachine,
  withdrawal: withdrawalMachine,
  dispute: disputeMachine,
  webhookDelivery: deliveryMachine,
  chain: chainMachine,
  channel: channelMachine
}

/** States an actor should not sit in for long: marked on the diagrams and the overview. */
export const PROBLEM_STATES: { readonly [K in MachineKind]: ReadonlyArray<string> } = {
  execution: ["failed", "timeout", "refunding", "completed.refundingDispute"],
  settlement: ["retrying", "failed"],
  circuit: ["open", "half-open"],
  treasury: ["signed", "reverted"],
  withdrawal: ["failed"],
  dispute: ["escalated"],
  webhookDelivery: ["dead"],
  chain: [],
  channel: ["claimFailed", "withdrawing"]
}

const GRAPHS = new Map<MachineKind, ReturnType<typeof machineGraph>>()
const graphOf = (kind: MachineKind) => {
  const known = GRAPHS.get(kind)
  if (known !== undefined) return known
  const graph = machineGraph(MACHINES[kind])
  GRAPHS.set(kind, graph)
  return graph
}

const summaryCells = (summary: Readonly<Record<string, string | null>>, now: Date) =>
  Object.entries(summary).filter(([, v]) => v !== null).slice(0, 4).map(([k, v], i) => html`${i === 0 ? "" : " · "}${k}: ${field(k, v, now)}`)

export const listPage = (list: ActorList, counts: Counts, cursor: string | undefined, now: Date): Html => {
  const kind = list.kind
  return html`<figure class="diagram">${diagramSvg({
    kind,
    graph: graphOf(kind),
    counts: new Map(counts.states.map((s) => [s.state, s.count])),
    problems: new Set(PROBLEM_STATES[kind]),
    selected: list.state
  })}<figcaption class="muted">Drawn from machines/${kind === "webhookDelivery" ? "webhookDelivery" : kind === "treasury" ? "treasuryTx" : kind}.ts; red: problem states holding actors; click a state to list its actors.</figcaption></figure>
<p>State: ${[
    html`<a href="${opsPath(["machines", kind])}">${list.state === null ? html`<strong>all</strong>` : "all"}</a>`,
    ...counts.states.map((s) =>
      html` · <a href="${opsPath(["machines", kind], { state: s.state })}">${s.state === list.state ? html`<strong>${s.state}</strong>` : s.state} (${s.count})</a>`)
  ]}</p>
<table id="actors"><thead><tr><th>Actor</th><th>State</th><th>Created</th><th>Summary</th></tr></thead><tbody>${
    list.actors.length === 0
      ? html`<tr><td colspan="4" class="muted">none</td></tr>`
      : list.actors.map((a) =>
        html`<tr><td><a href="${opsPath(["machines", a.kind, a.id])}">${a.id}</a></td><td>${a.state}</td><td>${when(a.createdAt, now)}</td><td>${summaryCells(a.summary, now)}</td></tr>`)
  }</tbody></table>
<p>${cursor === undefined ? "" : html`<a href="${opsPath(["machines", kind], { state: list.state ?? undefined })}">First page</a> `}${
    list.pagination.nextCursor === null
      ? ""
      : html`<a rel="next" href="${opsPath(["machines", kind], { state: list.state ?? undefined, cursor: list.pagination.nextCursor })}">Next page →</a>`
  }</p>`
}
