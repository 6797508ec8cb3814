// The console's pure parts: state diagrams read from the machine definitions (every state the inspection counts, every
// transition between them), the attention ranking and counts, the one format for money and times, and the devnet's
// operator token kept across restarts.
import { mkdtemp, readFile, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { devnetOperatorToken } from "../../layers/devnet/operatorToken.js"
import { type AttentionItem, countByKind, rank } from "../../services/operator/Attention.js"
import { KINDS } from "../../services/operator/Kinds.js"
import { MACHINE_KINDS } from "../../src/domain/Operator.js"
import { diagramSvg, machineGraph } from "../../src/ops/diagram.js"
import { relative, usdc, when } from "../../src/ops/format.js"
import { MACHINES, PROBLEM_STATES } from "../../src/ops/pages/machines.js"

describe("state diagrams", () => {
  it.each(MACHINE_KINDS)("%s: the diagram has every state the inspection counts, and edges only between them", (kind) => {
    const graph = machineGraph(MACHINES[kind])
    expect(graph.states).toEqual(KINDS[kind].states)
    for (const e of graph.edges) {
      expect(graph.states).toContain(e.from)
      expect(graph.states).toContain(e.to)
    }
    for (const problem of PROBLEM_STATES[kind]) expect(graph.states).toContain(problem)
  })

  it("the execution machine's transitions come from its definition (events, always, compound states entered at their initial child)", () => {
    const graph = machineGraph(MACHINES.execution)
    const edge = (from: string, to: string) => graph.edges.find((e) => e.from === from && e.to === to)?.events
    expect(graph.initial).toBe("running")
    expect(edge("running", "completed.awaitingPayment")).toEqual(["AGENT_SUCCEEDED"])
    expect(edge("failed", "refunding")).toEqual(["(always)"])
    expect(edge("refunding", "refunded")).toEqual(["REFUND_CONFIRMED"])
    expect(graph.selfEvents["refunding"]).toContain("REFUND_RETRY")
  })

  it("the SVG links each state to its actors, shows its count and marks problem states holding actors", () => {
    const svg = diagramSvg({ kind: "webhookDelivery", graph: machineGraph(MACHINES.webhookDelivery), counts: new Map([["dead", 3]]), problems: new Set(["dead"]) }).markup
    expect(svg).toContain(`href="/ops/machines/webhookDelivery?state=dead" data-state="dead" data-problem="yes"`)
    expect(svg).toContain(`data-count="3">3 actors · problem`)
    expect(svg).toContain(`data-from="pending" data-to="delivered"`)
    expect(svg).not.toContain("<script")
  })
})

const item = (kind: AttentionItem["kind"], amount: bigint, since: number): AttentionItem =>
  ({ kind, machine: null, actorId: `${kind}-${since}`, agentId: null, amount, since: new Date(since), cause: "", lever: null, leverTarget: null })

describe("needs attention", () => {
  it("ranks by money at stake, then the oldest first; counts every kind, zeros included", () => {
    const items = [item("circuit_open", 0n, 1), item("refund_unconfirmed", 5n, 3), item("dispute_escalated", 5n, 2), item("settlement_failed", 9n, 4)]
    expect(rank(items).map((i) => i.kind)).toEqual(["settlement_failed", "dispute_escalated", "refund_unconfirmed", "circuit_open"])
    const counts = countByKind(items)
    expect(counts.refund_unconfirmed).toBe(1)
    expect(counts.delivery_dead).toBe(0)
    expect(Object.keys(counts)).toHaveLength(15)
    expect(counts.payment_held).toBe(0)
  })
})

describe("one format", () => {
  it("USDC as decimals, times as UTC with their age", () => {
    expect(usdc(11_000n)).toBe("0.011000 USDC")
    expect(usdc("-2500000")).toBe("-2.500000 USDC")
    const now = new Date("2026-11-27T12:00:00Z")
    expect(relative(new Date("2026-11-27T11:57:30Z"), now)).toBe("2 min ago")
    expect(relative(new Date("2026-11-29T12:00:00Z"), now)).toBe("in 2 d")
    expect(String(when("2026-11-27T09:00:00.000Z", now))).toBe(`<time datetime="2026-11-27T09:00:00.000Z">2026-11-27 09:00:00 UTC</time> <span class="muted">(3 h ago)</span>`)
    // PostgreSQL's text form of a timestamptz reads the same.
    expect(String(when("2026-11-27 09:00:00+00", now))).toContain("2026-11-27 09:00:00 UTC")
  })
})

describe("devnet operator token", () => {
  it("is generated once into DATA_DIR/operator-token (0600) and the same at the next start", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ops-token-"))
    try {
      const first = await devnetOperatorToken(join(dir, "data"))
      expect(first).toMatch(/^devnet-[A-Za-z0-9_-]{24}$/)
      expect(await devnetOperatorToken(join(dir, "data"))).toBe(first)
      expect((await readFile(join(dir, "data", "operator-token"), "utf8")).trim()).toBe(first)
      expect((await stat(join(dir, "data", "operator-token"))).mode & 0o777).toBe(0o600)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
