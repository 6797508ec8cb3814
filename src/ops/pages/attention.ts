// The console's first page: what needs attention, most money at stake first, each row with its cause in words and
// links to the actor, its agent and its lever.
import type { AttentionItem, AttentionKind } from "../../../services/operator/Attention.js"
import { actorLink, agentLink, usdc, when } from "../format.js"
import { type Html, html, opsPath } from "../html.js"

export const KIND_LABELS: { readonly [K in AttentionKind]: string } = {
  execution_overdue: "Execution past its deadline",
  payment_held: "Payment held after a failed call",
  settlement_retrying: "Settlement retrying",
  settlement_failed: "Settlement failed",
  treasury_stuck: "Treasury transaction not mined",
  refund_unconfirmed: "Refund not confirmed",
  withdrawal_slow: "Withdrawal processing too long",
  dispute_escalated: "Dispute escalated",
  dispute_due_soon: "Dispute near its deadline",
  webhook_switched_off: "Webhook switched off",
  delivery_dead: "Delivery dead-lettered",
  circuit_open: "Circuit open",
  reconciliation_drift: "Reconciliation drift",
  channel_claim_failed: "Channel claim failed",
  channel_withdrawing: "Channel withdrawal: claim before it finalizes"
}

const subject = (item: AttentionItem): Html | string =>
  item.machine !== null ? html`${item.machine} ${actorLink(item.machine, item.actorId)}`
    : item.kind === "webhook_switched_off" ? html`webhook <a class="id" href="${opsPath(["search"], { q: item.actorId })}">${item.actorId}</a>`
    : html`reconciliation #${item.actorId}`

/** Where the lever is pulled: the actor's page (its form) or, for disputes, the operator API's resolve call. */
const leverCell = (item: AttentionItem): Html | string => {
  if (item.lever === null) return item.agentId === null ? html`<span class="muted">none: investigate</span>` : html`<a href="${opsPath(["agents", item.agentId])}">agent page</a>`
  const page = item.lever === "suspend_agent" && item.agentId !== null ? opsPath(["machines", "circuit", item.agentId]) : item.machine === null ? null : opsPath(["machines", item.machine, item.actorId])
  return page === null ? item.lever : html`<a class="lever-link" data-lever="${item.lever}" href="${page}#lever-${item.lever}">${item.lever.replaceAll("_", " ")}</a>`
}

export const attentionPage = (items: ReadonlyArray<AttentionItem>, now: Date): Html => {
  const byKind = new Map<AttentionKind, number>()
  for (const item of items) byKind.set(item.kind, (byKind.get(item.kind) ?? 0) + 1)
  const total = items.reduce((sum, i) => sum + i.amount, 0n)
  return html`<p>${items.length === 0
    ? html`<strong>Nothing needs attention.</strong> No actor is stuck or failing.`
    : html`<strong>${items.length}</strong> item${items.length === 1 ? "" : "s"}, <strong>${usdc(total)}</strong> at stake: ${
      [...byKind.entries()].map(([k, n], i) => html`${i === 0 ? "" : " · "}${KIND_LABELS[k]} ${n}`)
    }`}</p>
<table id="attention"><thead><tr><th>What</th><th>Actor</th><th>Agent</th><th>At stake</th><th>Since</th><th>Why</th><th>Lever</th></tr></thead><tbody>${
    items.length === 0
      ? html`<tr><td colspan="7" class="muted">none</td></tr>`
      : items.map((i) =>
        html`<tr data-kind="${i.kind}" data-actor="${i.actorId}"><td>${KIND_LABELS[i.kind]}</td><td>${subject(i)}</td><td>${agentLink(i.agentId)}</td><td class="num">${i.amount === 0n ? "" : usdc(i.amount)}</td><td>${when(i.since, now)}</td><td class="cause">${i.cause}</td><td>${leverCell(i)}</td></tr>`)
  }</tbody></table>
<p class="muted">Ranked by money at stake, then age. Failed and timed-out calls are listed while their payment waits in escrow for a retry. Thresholds: treasury transactions unmined after 2 min, refunds unconfirmed after 10 min, withdrawals processing after 30 min, disputes within 6 h of escalating. <a href="/ops/overview">Overview and machines →</a></p>`
}
