// Search by any id: the form (also in the header of every page) and its hits, each a link to the page that shows it.
import type { SearchHit } from "../../../services/operator/Search.js"
import { when } from "../format.js"
import { type Html, html, opsPath } from "../html.js"

export const hitPath = (hit: SearchHit): string => hit.page === "agent" ? opsPath(["agents", hit.id]) : opsPath(["machines", hit.page, hit.id])

export const searchForm = (q: string): Html =>
  html`<form method="get" action="/ops/search" class="search" role="search"><input type="search" name="q" value="${q}" maxlength="128" placeholder="agent, execution, tx, payment, dispute, withdrawal, delivery, chain, wallet, tx hash" aria-label="Search by id"><button type="submit">Find</button></form>`

export const searchPage = (q: string, hits: ReadonlyArray<SearchHit>, now: Date): Html =>
  html`${searchForm(q)}${q === "" ? html`<p class="muted">Paste any id: an agent id, execution (req_…), transaction (tx_…), escrow, payment, refund, dispute (dsp_…), withdrawal (wd_…), webhook (wh_…), delivery (del_…), dead letter (dlq_…), chain, channel (or a deposit's nonce), treasury transaction, wallet address or transaction hash.</p>`
    : hits.length === 0 ? html`<p>Nothing has the id <code>${q}</code>.</p>`
    : html`<table id="hits"><thead><tr><th>What</th><th>Id</th><th>Detail</th><th>Created</th></tr></thead><tbody>${hits.map((h) =>
      html`<tr><td>${h.what}</td><td><a class="id" href="${hitPath(h)}">${h.id}</a></td><td>${h.detail ?? ""}</td><td>${when(h.at, now)}</td></tr>`)}</tbody></table>`}`
