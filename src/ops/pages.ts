// Page bodies of the operator console (server-rendered, every value escaped by the `html` template): login, overview
// (counts per state and the activity charts), actors in a state, one actor (summary, timers, levers, history, snapshot),
// and the record of operator actions.
import type { Effect, Option } from "effect"
import type { ActionView } from "../../services/operator/Actions.js"
import type { Inspection } from "../../services/operator/Inspection.js"
import type { OperatorStats } from "../../services/operator/Stats.js"
import { activityCharts } from "./chart.js"
import { type Html, html, opsPath } from "./html.js"
import { leverForm, leversFor } from "./levers.js"

type Success<F> = F extends (...args: never) => Effect.Effect<infer A, infer _E, infer _R> ? A : never
type Counts = Success<Inspection["counts"]>
type ActorList = Success<Inspection["list"]>
type Actor = Success<Inspection["actor"]> extends Option.Option<infer A> ? A : never
type History = Success<Inspection["history"]> extends Option.Option<infer A> ? A : never
type Stats = Success<OperatorStats["stats"]>

export interface Notice {
  readonly ok: boolean
  readonly text: string
}

const notice = (n: Notice | undefined): Html | string =>
  n === undefined ? "" : html`<div class="notice ${n.ok ? "ok" : "bad"}" role="status">${n.text}</div>`

/** The login form; after a refused token, or while this address has too many failed logins (nothing is checked then). */
export const loginPage = (refused: boolean | { readonly retryAfterSeconds: number }): Html =>
  html`${refused === false ? "" : refused === true
    ? notice({ ok: false, text: "That token was refused." })
    : notice({ ok: false, text: `Too many failed logins from your address. Try again in ${Math.ceil(refused.retryAfterSeconds / 60)} minute${refused.retryAfterSeconds > 60 ? "s" : ""} (${refused.retryAfterSeconds} seconds); until then no token is checked.` })}
<form method="post" action="/ops/login" class="lever">
<label>Operator token <input type="password" name="token" required autocomplete="current-password" autofocus></label>
<button type="submit">Log in</button></form>
<p class="muted">The token is OPERATOR_TOKEN (printed in the devnet banner). It is checked once; the browser then keeps a signed session cookie, never the token.</p>`

export const overviewPage = (counts: ReadonlyArray<Counts>, stats: Stats): Html =>
  html`${activityCharts(stats.fees.byDay)}
<p>Fees collected: <strong>${stats.fees.total}</strong> USDC in total · executions: ${stats.transactions.total} (${stats.transactions.completed} completed) · agents: ${stats.agents.active} active, ${stats.agents.suspended} suspended</p>
<h2>Machines</h2><div class="kinds">${counts.map((k) =>
    html`<section><h3><a href="${opsPath(["machines", k.kind])}">${k.kind}</a> <span class="muted">(${k.total})</span></h3>
<table><tbody>${k.states.map((s) =>
      html`<tr><td><a href="${opsPath(["machines", k.kind], { state: s.state })}">${s.state}</a></td><td>${s.count}</td></tr>`)}</tbody></table></section>`)}</div>`

const summaryText = (summary: Readonly<Record<string, string | null>>) =>
  Object.entries(summary).filter(([, v]) => v !== null).slice(0, 4).map(([k, v]) => `${k}: ${v}`).join(" · ")

export const listPage = (list: ActorList, counts: Counts, cursor: string | undefined): Html =>
  html`<p>State: ${[
    html`<a href="${opsPath(["machines", list.kind])}">${list.state === null ? html`<strong>all</strong>` : "all"}</a>`,
    ...counts.states.map((s) =>
      html` · <a href="${opsPath(["machines", list.kind], { state: s.state })}">${s.state === list.state ? html`<strong>${s.state}</strong>` : s.state} (${s.count})</a>`)
  ]}</p>
<table><thead><tr><th>Actor</th><th>State</th><th>Created</th><th>Summary</th></tr></thead><tbody>${
    list.actors.length === 0
      ? html`<tr><td colspan="4" class="muted">none</td></tr>`
      : list.actors.map((a) =>
        html`<tr><td><a href="${opsPath(["machines", a.kind, a.id])}">${a.id}</a></td><td>${a.state}</td><td>${a.createdAt}</td><td>${summaryText(a.summary)}</td></tr>`)
  }</tbody></table>
<p>${cursor === undefined ? "" : html`<a href="${opsPath(["machines", list.kind], { state: list.state ?? undefined })}">First page</a> `}${
    list.pagination.nextCursor === null
      ? ""
      : html`<a rel="next" href="${opsPath(["machines", list.kind], { state: list.state ?? undefined, cursor: list.pagination.nextCursor })}">Next page →</a>`
  }</p>`

const operatorCell = (t: History["transitions"][number]): Html | string => {
  if (t.operator !== null) return html`<span class="op">${t.operator.action} by ${t.operator.name}</span>: ${t.operator.reason}`
  // An event an operator lever caused on another actor (e.g. AGENT_REINSTATED) carries its by and reason in the payload.
  const p = t.payload
  if (typeof p === "object" && p !== null && "by" in p && typeof p.by === "string") {
    return html`<span class="op">by ${p.by}</span>${"reason" in p && typeof p.reason === "string" ? html`: ${p.reason}` : ""}`
  }
  return ""
}

const actionRow = (a: ActionView) =>
  html`<tr><td>${a.at}</td><td>${a.operator}</td><td>${a.action}</td><td>${a.machine} ${a.actorId}</td><td>${a.outcome}</td><td>${a.from ?? ""} → ${a.to ?? ""}</td><td>${a.reason}</td></tr>`

const actionsTable = (actions: ReadonlyArray<ActionView>) =>
  html`<table><thead><tr><th>When</th><th>Operator</th><th>Action</th><th>On</th><th>Outcome</th><th>From → to</th><th>Reason</th></tr></thead><tbody>${
    actions.length === 0 ? html`<tr><td colspan="7" class="muted">none</td></tr>` : actions.map(actionRow)
  }</tbody></table>`

export const actorPage = (actor: Actor, history: History, csrf: string, flash: Notice | undefined): Html => {
  const offers = leversFor(actor)
  const agentId = actor.kind === "execution" ? actor.summary["agentId"] : null
  return html`${notice(flash)}
<p>Kind <a href="${opsPath(["machines", actor.kind])}">${actor.kind}</a> · state <strong data-testid="state">${actor.state}</strong> · created ${actor.createdAt}${
    agentId === null || agentId === undefined ? "" : html` · <a href="${opsPath(["machines", "circuit", agentId])}">agent's circuit</a>`
  }</p>
<h2>Summary</h2><table><tbody>${Object.entries(actor.summary).map(([k, v]) => html`<tr><th>${k}</th><td>${v ?? html`<span class="muted">null</span>`}</td></tr>`)}</tbody></table>
<h2>Pending timers</h2><table><thead><tr><th>Event</th><th>Due</th><th>Source</th><th>Attempts</th></tr></thead><tbody>${
    actor.timers.length === 0
      ? html`<tr><td colspan="4" class="muted">none</td></tr>`
      : actor.timers.map((t) => html`<tr><td>${t.event}</td><td>${t.dueAt}</td><td>${t.source}</td><td>${t.attempts ?? ""}</td></tr>`)
  }</tbody></table>
<h2>Levers</h2>${offers.length === 0 ? html`<p class="muted">No lever applies to this actor in its state.</p>` : offers.map((o) => leverForm(o, actor, csrf))}
<h2>History</h2><table id="history"><thead><tr><th>#</th><th>Event</th><th>From</th><th>To</th><th>At</th><th>Operator action</th></tr></thead><tbody>${
    history.transitions.map((t) =>
      html`<tr><td>${t.id}</td><td>${t.event}</td><td>${t.from ?? ""}</td><td>${t.to}</td><td>${t.at}</td><td>${operatorCell(t)}</td></tr>`)
  }</tbody></table>${
    history.pagination.nextCursor === null
      ? ""
      : html`<p><a href="${opsPath(["machines", actor.kind, actor.id], { history: history.pagination.nextCursor })}">Later transitions →</a></p>`
  }
<h2>Operator actions on this actor</h2>${actionsTable(actor.operatorActions)}
<h2>Snapshot</h2><pre>${JSON.stringify(actor.snapshot, null, 2)}</pre>`
}

export const actionsPage = (actions: ReadonlyArray<ActionView>, nextCursor: string | null): Html =>
  html`${actionsTable(actions)}${nextCursor === null ? "" : html`<p><a rel="next" href="${opsPath(["actions"], { cursor: nextCursor })}">Next page →</a></p>`}`

export const messagePage = (text: string): Html => html`<p>${text}</p><p><a href="/ops">Back to the overview</a></p>`
