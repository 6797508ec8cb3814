// The campaign's report: one line per round on stdout, and its section of docs/reliability.md (rounds, faults by kind,
// anomalies with the round and fault that showed them, the command that produced it).
import { writeSection } from "../lib/sections.js"
import type { CallResult } from "./load.js"
import type { Fault, FaultKind } from "./faults.js"
import { FAULT_KINDS } from "./faults.js"

export interface RoundResult {
  readonly round: number
  readonly fault: Fault
  /** When the fault struck, ms after the round's load began. */
  readonly atMs: number
  readonly calls: ReadonlyArray<CallResult>
  /** The channel payers' calls (the official batch-settlement client), beside the exact ones. */
  readonly channelCalls: ReadonlyArray<CallResult>
  readonly anomalies: ReadonlyArray<string>
  /** Seconds until nothing the round started was open (or the wait gave up). */
  readonly settledS: number
}

export interface Campaign {
  readonly command: string
  readonly seed: number
  readonly startedAt: Date
  readonly rounds: ReadonlyArray<RoundResult>
  /** The service's commit. */
  readonly commit: string
}

const answers = (calls: ReadonlyArray<CallResult>) => {
  const by = new Map<string, number>()
  for (const c of calls) {
    const key = c.status === 0 ? "cut" : c.status === 200 ? `200 ${c.state ?? "?"}` : String(c.status)
    by.set(key, (by.get(key) ?? 0) + 1)
  }
  return [...by].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}: ${n}`).join(", ")
}

export const roundLine = (r: RoundResult) =>
  `round ${r.round}: ${r.fault.kind} (${r.fault.detail}) at ${r.atMs} ms; ${r.calls.length} calls (${answers(r.calls)}), ${r.channelCalls.length} by channel (${answers(r.channelCalls)}); settled in ${r.settledS} s; ` +
  `${r.anomalies.length === 0 ? "no anomalies" : `${r.anomalies.length} ANOMALIES:\n  ${r.anomalies.join("\n  ")}`}`

export const render = (c: Campaign) => {
  const byKind = new Map<FaultKind, number>(FAULT_KINDS.map((k) => [k, 0]))
  for (const r of c.rounds) byKind.set(r.fault.kind, (byKind.get(r.fault.kind) ?? 0) + 1)
  const anomalies = c.rounds.flatMap((r) => r.anomalies.map((a) => `- round ${r.round} (${r.fault.kind}, ${r.fault.detail}): ${a}`))
  const calls = c.rounds.reduce((n, r) => n + r.calls.length, 0)
  const byChannel = c.rounds.reduce((n, r) => n + r.channelCalls.length, 0)
  return [
    `Run of ${c.startedAt.toISOString()} (commit ${c.commit}), seed ${c.seed}: \`${c.command}\``,
    "",
    `| Rounds | Paid calls (exact) | Paid calls (channel) | Anomalies |`,
    `| --- | --- | --- | --- |`,
    `| ${c.rounds.length} | ${calls} | ${byChannel} | ${anomalies.length} |`,
    "",
    `| Fault | Rounds |`,
    `| --- | --- |`,
    ...[...byKind].map(([k, n]) => `| ${k} | ${n} |`),
    "",
    anomalies.length === 0 ? "Anomalies: none." : `Anomalies:\n\n${anomalies.join("\n")}`,
    "",
    "Rounds:",
    "",
    ...c.rounds.map((r) => `- ${roundLine(r).replace(/\n {2}/g, "; ")}`)
  ].join("\n")
}

export const writeReport = (file: string, c: Campaign) => writeSection(file, "chaos", render(c))
