// The overview: activity charts, platform figures, and per machine kind its counts per state (problem states marked).
import { activityCharts } from "../chart.js"
import { type Html, html, opsPath } from "../html.js"
import { PROBLEM_STATES } from "./machines.js"
import type { Counts, Stats } from "./types.js"

export const overviewPage = (counts: ReadonlyArray<Counts>, stats: Stats): Html =>
  html`${activityCharts(stats.fees.byDay)}
<p>Fees collected: <strong>${stats.fees.total} USDC</strong> in total · executions: ${stats.transactions.total} (${stats.transactions.completed} completed) · agents: ${stats.agents.active} active, ${stats.agents.suspended} suspended</p>
<h2>Machines</h2><p class="muted">Each kind's name opens its state diagram.</p><div class="kinds">${counts.map((k) =>
    html`<section><h3><a href="${opsPath(["machines", k.kind])}">${k.kind}</a> <span class="muted">(${k.total})</span></h3>
<table><tbody>${k.states.map((s) => {
      const problem = PROBLEM_STATES[k.kind].includes(s.state)
      return html`<tr${problem && s.count > 0 ? html` class="problem"` : ""}><td><a href="${opsPath(["machines", k.kind], { state: s.state })}">${s.state}</a>${problem ? html` <span class="tag">problem</span>` : ""}</td><td>${s.count}</td></tr>`
    })}</tbody></table></section>`)}</div>`
