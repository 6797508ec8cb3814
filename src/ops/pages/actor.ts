// One actor (summary, pending timers, levers, history, snapshot) and the record of operator actions.
import type { ActionView } from "../../../services/operator/Actions.js"
import { actorLink, agentLink, field, when } from "../format.js"
import { type Html, html, opsPath } from "../html.js"
import { disputeLeverForm } from "../disputeLever.js"
import { leverForm, leversFor } from "../levers.js"
import { notice } from "./login.js"
import type { Actor, History, Notice } from "./types.js"

const operatorCell = (t: History["transitions"][number]): Html | string => {
  if (t.operator !== null) return html`<span class="op">${t.operator.action} by ${t.operator.name}</span>: ${t.operator.reason}`
  // An event an operator lever caused on another actor (e.g. AGENT_REINSTATED) carries its by and reason in the payload.
  const p = t.payload
  if (typeof p === "object" && p !== null && "by" in p && typeof p.by === "string") {
    return html`<span class="op">by ${p.by}</span>${"reason" in p && typeof p.reason === "string" ? html`: ${p.reason}` : ""}`
  }
  return ""
}

const actionRow = (a: ActionView, now: Date) =>
  html`<tr><td>${when(a.at, now)}</td><td>${a.operator}</td><td>${a.action}</td><td>${a.machine} ${a.machine === "agent" ? agentLink(a.actorId) : actorLink(a.machine, a.actorId)}</td><td>${a.outcome}</td><td>${a.from ?? ""} → ${a.to ?? ""}</td><td>${a.reason}</td></tr>`

export const actionsTable = (actions: ReadonlyArray<ActionView>, now: Date) =>
  html`<table><thead><tr><th>When</th><th>Operator</th><th>Action</th><th>On</th><th>Outcome</th><th>From → to</th><th>Reason</th></tr></thead><tbody>${
    actions.length === 0 ? html`<tr><td colspan="7" class="muted">none</td></tr>` : actions.map((a) => actionRow(a, now))
  }</tbody></table>`

export const actorPage = (actor: Actor, history: History, csrf: string, flash: Notice | undefined, now: Date): Html => {
  const offers = leversFor(actor)
  const dispute = disputeLeverForm(actor, csrf)
  const agentId = actor.kind === "execution" || actor.kind === "withdrawal" || actor.kind === "dispute" ? actor.summary["agentId"] : actor.kind === "circuit" ? actor.id : null
  return html`${notice(flash)}
<p>Kind <a href="${opsPath(["machines", actor.kind])}">${actor.kind}</a> · state <strong data-testid="state">${actor.state}</strong> · created ${when(actor.createdAt, now)}${
    agentId === null || agentId === undefined ? "" : html` · ${agentLink(agentId, "agent page")} · <a href="${opsPath(["machines", "circuit", agentId])}">agent's circuit</a>`
  }</p>
<h2>Summary</h2><table><tbody>${Object.entries(actor.summary).map(([k, v]) => html`<tr><th>${k}</th><td>${field(k, v, now)}</td></tr>`)}</tbody></table>
<h2>Pending timers</h2><table><thead><tr><th>Event</th><th>Due</th><th>Source</th><th>Attempts</th></tr></thead><tbody>${
    actor.timers.length === 0
      ? html`<tr><td colspan="4" class="muted">none</td></tr>`
      : actor.timers.map((t) => html`<tr><td>${t.event}</td><td>${when(t.dueAt, now)}</td><td>${t.source}</td><td>${t.attempts ?? ""}</td></tr>`)
  }</tbody></table>
<h2>Levers</h2>${offers.length === 0 && dispute === "" ? html`<p class="muted">No lever applies to this actor in its state.</p>` : [...offers.map((o) => leverForm(o, actor, csrf)), dispute]}
<h2>History</h2><table id="history"><thead><tr><th>#</th><th>Event</th><th>From</th><th>To</th><th>At</th><th>Operator action</th></tr></thead><tbody>${
    history.transitions.map((t) =>
      html`<tr><td>${t.id}</td><td>${t.event}</td><td>${t.from ?? ""}</td><td>${t.to}</td><td>${when(t.at, now)}</td><td>${operatorCell(t)}</td></tr>`)
  }</tbody></table>${
    history.pagination.nextCursor === null
      ? ""
      : html`<p><a href="${opsPath(["machines", actor.kind, actor.id], { history: history.pagination.nextCursor })}">Later transitions →</a></p>`
  }
<h2>Operator actions on this actor</h2>${actionsTable(actor.operatorActions, now)}
<h2>Snapshot</h2><pre>${JSON.stringify(actor.snapshot, null, 2)}</pre>`
}

export const actionsPage = (actions: ReadonlyArray<ActionView>, nextCursor: string | null, now: Date): Html =>
  html`${actionsTable(actions, now)}${nextCursor === null ? "" : html`<p><a rel="next" href="${opsPath(["actions"], { cursor: nextCursor })}">Next page →</a></p>`}`
