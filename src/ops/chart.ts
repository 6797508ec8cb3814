// Inline SVG bar charts rendered on the server (no script): executions per day and fees (platform revenue) per day,
// from the operator statistics' `fees.byDay`.
import { type Html, html } from "./html.js"

export interface DayPoint {
  readonly date: string
  readonly fees: string
  readonly executions: number
  readonly completed: number
}

const WIDTH = 520
const HEIGHT = 150
const PAD = { left: 44, right: 8, top: 18, bottom: 22 }

/** A scale's top: a round number at or above the maximum (1, 2 or 5 times a power of ten). */
const niceTop = (max: number): number => {
  if (max <= 0) return 1
  const power = 10 ** Math.floor(Math.log10(max))
  const step = [1, 2, 5, 10].find((m) => m * power >= max) ?? 10
  return step * power
}

const bars = (title: string, days: ReadonlyArray<DayPoint>, value: (d: DayPoint) => number, label: (v: number) => string, fill: string): Html => {
  const top = niceTop(Math.max(0, ...days.map(value)))
  const plotW = WIDTH - PAD.left - PAD.right
  const plotH = HEIGHT - PAD.top - PAD.bottom
  const slot = plotW / Math.max(1, days.length)
  const barW = Math.max(1, slot * 0.75)
  const y = (v: number) => PAD.top + plotH - (v / top) * plotH
  const first = days[0]?.date ?? ""
  const last = days[days.length - 1]?.date ?? ""
  return html`<svg role="img" aria-label="${title}" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" xmlns="http://www.w3.org/2000/svg">
<text x="${PAD.left}" y="12" font-weight="600">${title}</text>
<line x1="${PAD.left}" y1="${y(0)}" x2="${WIDTH - PAD.right}" y2="${y(0)}" stroke="#9aa3b2"/>
<line x1="${PAD.left}" y1="${y(top)}" x2="${WIDTH - PAD.right}" y2="${y(top)}" stroke="#e3e6eb"/>
<text x="${PAD.left - 4}" y="${y(top) + 4}" text-anchor="end">${label(top)}</text>
<text x="${PAD.left - 4}" y="${y(0) + 4}" text-anchor="end">0</text>
${days.map((d, i) => {
    const v = value(d)
    const x = PAD.left + i * slot + (slot - barW) / 2
    return html`<rect x="${x.toFixed(1)}" y="${y(v).toFixed(1)}" width="${barW.toFixed(1)}" height="${(y(0) - y(v)).toFixed(1)}" fill="${fill}"><title>${d.date}: ${label(v)}</title></rect>`
  })}
<text x="${PAD.left}" y="${HEIGHT - 6}">${first}</text>
<text x="${WIDTH - PAD.right}" y="${HEIGHT - 6}" text-anchor="end">${last}</text>
</svg>`
}

/** Fees arrive as 6-decimal USDC strings; the chart only needs them as numbers of USDC for bar heights. */
const usdc = (d: DayPoint) => Number(d.fees)

export const activityCharts = (days: ReadonlyArray<DayPoint>): Html =>
  html`<div class="kinds">${bars("Executions per day", days, (d) => d.executions, (v) => String(v), "#4a78b5")}${
    bars("Fees collected per day (USDC)", days, usdc, (v) => (v >= 1 ? v.toFixed(2) : v.toFixed(4)), "#5aa469")
  }</div>`
