// One agent: status, tier, circuit and reputation; its balance; latest reputation events, executions, disputes,
// withdrawals and webhooks, every id a link.
import type { Option } from "effect"
import type { AgentView } from "../../../services/operator/AgentView.js"
import { actorLink, idLink, usdc, when } from "../format.js"
import { type Html, html, opsPath } from "../html.js"
import type { Success } from "./types.js"

type View = Success<AgentView["view"]> extends Option.Option<infer A> ? A : never

const empty = (columns: number) => html`<tr><td colspan="${columns}" class="muted">none</td></tr>`

export const agentPage = (v: View, now: Date): Html => {
  const a = v.agent
  return html`<table id="agent"><tbody>
<tr><th>Name</th><td>${a.name}</td></tr>
<tr><th>Status</th><td><strong>${a.status}</strong>${a.statusReason === null ? "" : html` <span class="muted">(${a.statusReason})</span>`}</td></tr>
<tr><th>Wallet</th><td>${idLink(a.wallet)}</td></tr>
<tr><th>Trust tier</th><td>${a.trustTier}</td></tr>
<tr><th>Circuit</th><td><a href="${opsPath(["machines", "circuit", a.id])}">${a.circuitState}</a> · health ${a.healthScore.toFixed(2)}</td></tr>
<tr><th>Reputation</th><td>${a.reputationScore} / 100 · ${a.completedExecutions} completed executions</td></tr>
<tr><th>Registered</th><td>${when(a.createdAt, now)}</td></tr>
</tbody></table>
<h2>Balance</h2>${v.balance === null ? html`<p class="muted">no balance</p>` : html`<table id="balance"><tbody>
<tr><th>Available</th><td>${v.balance.available} USDC</td></tr><tr><th>Pending (held escrow earnings)</th><td>${v.balance.pending} USDC</td></tr>
<tr><th>Escrow held</th><td>${v.balance.escrow.pendingTotal} USDC in ${v.balance.escrow.pendingCount}</td></tr>
<tr><th>Earned in total</th><td>${v.balance.totalEarned} USDC</td></tr><tr><th>Withdrawn</th><td>${v.balance.totalWithdrawn} USDC</td></tr>
<tr><th>Disputed</th><td>${v.balance.totalDisputed} USDC</td></tr></tbody></table>`}
<h2>Executions</h2><table id="executions"><thead><tr><th>Execution</th><th>State</th><th>Capability</th><th>Price</th><th>Payer</th><th>Error</th><th>Created</th></tr></thead><tbody>${
    v.executions.length === 0 ? empty(7) : v.executions.map((e) =>
      html`<tr><td>${actorLink("execution", e.id)}</td><td>${e.state}</td><td>${e.capabilityId}</td><td>${usdc(e.price)}</td><td>${idLink(e.payer)}</td><td>${e.error ?? ""}</td><td>${when(e.createdAt, now)}</td></tr>`)
  }</tbody></table>
<h2>Disputes</h2><table id="disputes"><thead><tr><th>Dispute</th><th>Status</th><th>Reason</th><th>Amount</th><th>Respond by</th><th>Opened</th></tr></thead><tbody>${
    v.disputes.length === 0 ? empty(6) : v.disputes.map((d) =>
      html`<tr><td>${actorLink("dispute", d.id)}</td><td>${d.status}</td><td>${d.reason}</td><td>${usdc(d.amount)}</td><td>${when(d.respondBy, now)}</td><td>${when(d.createdAt, now)}</td></tr>`)
  }</tbody></table>
<h2>Withdrawals</h2><table id="withdrawals"><thead><tr><th>Withdrawal</th><th>Status</th><th>Amount</th><th>Transaction</th><th>Requested</th></tr></thead><tbody>${
    v.withdrawals.length === 0 ? empty(5) : v.withdrawals.map((w) =>
      html`<tr><td>${actorLink("withdrawal", w.id)}</td><td>${w.status}</td><td>${usdc(w.amount)}</td><td>${idLink(w.txHash)}</td><td>${when(w.createdAt, now)}</td></tr>`)
  }</tbody></table>
<h2>Webhooks</h2><table id="webhooks"><thead><tr><th>Webhook</th><th>URL</th><th>State</th><th>Consecutive failures</th><th>Dead letters</th><th>Last failure</th><th>Last success</th></tr></thead><tbody>${
    v.webhooks.length === 0 ? empty(7) : v.webhooks.map((w) =>
      html`<tr><td>${idLink(w.id)}</td><td>${w.url}</td><td>${w.isActive ? "active" : html`<strong>switched off</strong>`}</td><td>${w.failureCount}</td><td>${w.deadLetters}</td><td>${when(w.lastFailure, now)}</td><td>${when(w.lastSuccess, now)}</td></tr>`)
  }</tbody></table>
<h2>Reputation events</h2><table id="reputation"><thead><tr><th>Event</th><th>Change</th><th>After</th><th>Details</th><th>Execution</th><th>At</th></tr></thead><tbody>${
    v.reputation.length === 0 ? empty(6) : v.reputation.map((r) =>
      html`<tr><td>${r.eventType}</td><td>${r.scoreDelta > 0 ? `+${r.scoreDelta}` : r.scoreDelta}</td><td>${r.scoreAfter}</td><td>${r.details}</td><td>${actorLink("execution", r.executionId)}</td><td>${when(r.createdAt, now)}</td></tr>`)
  }</tbody></table>`
}
