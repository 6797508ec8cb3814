// One way to show money, times and ids in every console table: USDC as decimals, timestamps as "YYYY-MM-DD HH:MM:SS UTC"
// with their age relative to now, and ids as links to the page that shows them (an actor, an agent, or a search).
import { formatUsdc } from "../domain/Money.js"
import { type Html, html, opsPath } from "./html.js"

/** Micro-USDC (bigint or its digits) as "1.250000 USDC"; anything else unchanged. */
export const usdc = (micros: bigint | string | null | undefined): string => {
  if (micros === null || micros === undefined) return ""
  if (typeof micros === "bigint") return `${formatUsdc(micros)} USDC`
  return /^-?\d{1,30}$/.test(micros) ? `${formatUsdc(BigInt(micros))} USDC` : micros
}

/** "3 min ago", "in 2 h": the largest unit, rounded down. */
export const relative = (at: Date, now: Date): string => {
  const ms = now.getTime() - at.getTime()
  const abs = Math.abs(ms)
  const units: ReadonlyArray<readonly [number, string]> = [[86_400_000, "d"], [3_600_000, "h"], [60_000, "min"], [1_000, "s"]]
  const [size, name] = units.find(([size]) => abs >= size) ?? [1_000, "s"]
  const n = Math.floor(abs / size)
  return ms >= 0 ? `${n} ${name} ago` : `in ${n} ${name}`
}

const stamp = (d: Date) => d.toISOString().replace("T", " ").replace(/\.\d{3}Z$/, " UTC")

/** A timestamp (Date, ISO text or PostgreSQL text) as `<time>` with its age; text that is not a time stays as is. */
export const when = (value: Date | string | null | undefined, now: Date): Html | string => {
  if (value === null || value === undefined || value === "") return ""
  // PostgreSQL's text form ("2026-11-27 09:00:00.12+00") becomes ISO 8601 ("2026-11-27T09:00:00.12+00:00").
  const d = value instanceof Date ? value : new Date(value.replace(/^(\d{4}-\d{2}-\d{2}) /, "$1T").replace(/([+-]\d{2})$/, "$1:00"))
  if (Number.isNaN(d.getTime())) return typeof value === "string" ? value : ""
  return html`<time datetime="${d.toISOString()}">${stamp(d)}</time> <span class="muted">(${relative(d, now)})</span>`
}

/** Search link for any id the console knows how to find. */
export const idLink = (id: string | null | undefined): Html | string =>
  id === null || id === undefined || id === "" ? "" : html`<a class="id" href="${opsPath(["search"], { q: id })}">${id}</a>`

export const agentLink = (id: string | null | undefined, label?: string): Html | string =>
  id === null || id === undefined || id === "" ? "" : html`<a class="id" href="${opsPath(["agents", id])}">${label ?? id}</a>`

export const actorLink = (kind: string, id: string | null | undefined): Html | string =>
  id === null || id === undefined || id === "" ? "" : html`<a class="id" href="${opsPath(["machines", kind, id])}">${id}</a>`

const MONEY_KEYS = new Set(["price", "amount", "fee", "netAmount", "totalBudget", "remaining", "refundAmount", "agentAmount", "debt", "clientRefund", "balance"])
const TIME_KEYS = /(At|By|_at)$/
const ACTOR_KEYS: Readonly<Record<string, string>> = { paymentId: "settlement", treasuryTxId: "treasury", rootExecutionId: "execution", executionId: "execution", chainId: "chain" }
const AGENT_KEYS = new Set(["agentId", "rootAgentId"])
const SEARCH_KEYS = new Set(["transactionId", "escrowId", "refundId", "txHash", "payer", "destinationWallet", "subjectId", "subscriptionId", "eventId", "deadLetterId", "requeuedFrom", "disputeId", "clientWallet"])

/** A summary field shown the console's way: money in USDC, times with their age, ids as links. */
export const field = (key: string, value: string | null, now: Date): Html | string => {
  if (value === null) return html`<span class="muted">null</span>`
  if (MONEY_KEYS.has(key)) return usdc(value)
  if (TIME_KEYS.test(key)) return when(value, now)
  if (AGENT_KEYS.has(key)) return agentLink(value)
  const kind = ACTOR_KEYS[key]
  if (kind !== undefined) return actorLink(kind, value)
  if (SEARCH_KEYS.has(key)) return idLink(value)
  return value
}
