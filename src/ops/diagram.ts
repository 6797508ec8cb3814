// A machine kind drawn as its state diagram, read from the XState definition itself (machine.root: states, `on`,
// `always` and delayed transitions), never a hand-drawn copy: leaf states as boxes with their live counts, problem states
// marked, each box a link to the actors in that state. Laid out in columns by distance from the initial state.
import type { AnyStateMachine, AnyStateNode } from "xstate"
import { type Html, html, opsPath } from "./html.js"

export interface Edge {
  readonly from: string
  readonly to: string
  readonly events: ReadonlyArray<string>
}

export interface Graph {
  /** Leaf states as the host stores them ("completed.held"). */
  readonly states: ReadonlyArray<string>
  readonly initial: string
  readonly edges: ReadonlyArray<Edge>
  /** Transitions that stay in their state (actions only), per state. */
  readonly selfEvents: Readonly<Record<string, ReadonlyArray<string>>>
}

const children = (node: AnyStateNode): ReadonlyArray<AnyStateNode> => Object.values(node.states)
const pathOf = (node: AnyStateNode) => node.path.join(".")

/** The leaf a transition into `node` ends in (a compound state enters its initial child). */
const entryLeaf = (node: AnyStateNode): AnyStateNode => {
  const first = node.initial?.target?.[0] ?? children(node)[0]
  return children(node).length === 0 || first === undefined ? node : entryLeaf(first)
}
const leavesUnder = (node: AnyStateNode): ReadonlyArray<AnyStateNode> =>
  children(node).length === 0 ? [node] : children(node).flatMap(leavesUnder)

const eventLabel = (event: string) => event.startsWith("xstate.after.") ? `after ${event.split(".")[2] ?? ""}` : event

/** Pure: the machine's leaf states and transitions between them (a parent's transitions apply to each of its leaves). */
export const machineGraph = (machine: AnyStateMachine): Graph => {
  const root: AnyStateNode = machine.root
  const states = leavesUnder(root).filter((n) => n !== root).map(pathOf)
  const edges = new Map<string, { from: string; to: string; events: Set<string> }>()
  const selfEvents: Record<string, Set<string>> = {}
  const visit = (node: AnyStateNode) => {
    const sources = node === root ? [] : leavesUnder(node)
    const transitions = [...[...node.transitions.entries()].flatMap(([event, ts]) => ts.map((t) => [eventLabel(event), t] as const)), ...(node.always ?? []).map((t) => ["(always)", t] as const)]
    for (const [event, t] of transitions) {
      const targets = (t.target ?? []).map(entryLeaf)
      for (const source of sources) {
        if (targets.length === 0) (selfEvents[pathOf(source)] ??= new Set()).add(event)
        for (const target of targets) {
          const key = `${pathOf(source)}→${pathOf(target)}`
          const edge = edges.get(key) ?? { from: pathOf(source), to: pathOf(target), events: new Set<string>() }
          edge.events.add(event)
          edges.set(key, edge)
        }
      }
    }
    children(node).forEach(visit)
  }
  visit(root)
  return {
    states,
    initial: pathOf(entryLeaf(root)),
    edges: [...edges.values()].map((e) => ({ from: e.from, to: e.to, events: [...e.events] })),
    selfEvents: Object.fromEntries(Object.entries(selfEvents).map(([k, v]) => [k, [...v]]))
  }
}

/** Pure: a column per state (its distance from the initial state; unreachable states last) and a row within it. */
export const layout = (graph: Graph): ReadonlyMap<string, { readonly column: number; readonly row: number }> => {
  const rank = new Map<string, number>([[graph.initial, 0]])
  const queue = [graph.initial]
  while (queue.length > 0) {
    const at = queue.shift() ?? ""
    for (const e of graph.edges) {
      if (e.from === at && !rank.has(e.to)) {
        rank.set(e.to, (rank.get(at) ?? 0) + 1)
        queue.push(e.to)
      }
    }
  }
  const last = Math.max(0, ...rank.values()) + 1
  const rows = new Map<number, number>()
  const placed = new Map<string, { column: number; row: number }>()
  for (const state of graph.states) {
    const column = rank.get(state) ?? last
    const row = rows.get(column) ?? 0
    rows.set(column, row + 1)
    placed.set(state, { column, row })
  }
  return placed
}

const BOX = { w: 168, h: 46 }
const GAP = { x: 96, y: 40 }
const PAD = 16

export interface DiagramInput {
  readonly kind: string
  readonly graph: Graph
  readonly counts: ReadonlyMap<string, number>
  readonly problems: ReadonlySet<string>
  /** The state whose actors the page lists (highlighted). */
  readonly selected?: string | null
}

/** Inline SVG (no script): boxes link to the list of actors in that state. */
export const diagramSvg = (d: DiagramInput): Html => {
  const at = layout(d.graph)
  const x = (s: string) => PAD + (at.get(s)?.column ?? 0) * (BOX.w + GAP.x)
  const y = (s: string) => PAD + (at.get(s)?.row ?? 0) * (BOX.h + GAP.y)
  const width = PAD * 2 + (Math.max(0, ...[...at.values()].map((p) => p.column)) + 1) * (BOX.w + GAP.x) - GAP.x
  const height = PAD * 2 + (Math.max(0, ...[...at.values()].map((p) => p.row)) + 1) * (BOX.h + GAP.y) + 40
  const edge = (e: Edge) => {
    const forward = (at.get(e.to)?.column ?? 0) > (at.get(e.from)?.column ?? 0)
    const [x1, y1] = forward ? [x(e.from) + BOX.w, y(e.from) + BOX.h / 2] : [x(e.from) + BOX.w / 2, y(e.from) + BOX.h]
    const [x2, y2] = forward ? [x(e.to), y(e.to) + BOX.h / 2] : [x(e.to) + BOX.w / 2, y(e.to) + BOX.h]
    // Backward and same-column transitions bow below the boxes.
    const path = forward ? `M${x1},${y1} L${x2},${y2}` : `M${x1},${y1} C${x1},${y1 + 40} ${x2},${y2 + 40} ${x2},${y2 + 2}`
    const [lx, ly] = forward ? [x1 + (x2 - x1) * 0.5, y1 + (y2 - y1) * 0.5 - 4] : [(x1 + x2) / 2, Math.max(y1, y2) + 32]
    return html`<g class="edge" data-from="${e.from}" data-to="${e.to}"><path d="${path}" fill="none" stroke="#8a93a3" marker-end="url(#arrow)"/><text x="${lx}" y="${ly}" text-anchor="middle" fill="#4b5361" font-size="10" paint-order="stroke" stroke="#ffffff" stroke-width="3">${e.events.join(", ")}</text></g>`
  }
  const box = (state: string) => {
    const count = d.counts.get(state) ?? 0
    const problem = d.problems.has(state)
    const alarm = problem && count > 0
    const self = d.graph.selfEvents[state] ?? []
    return html`<a href="${opsPath(["machines", d.kind], { state })}" data-state="${state}" data-problem="${problem ? "yes" : "no"}"><g class="state">
<rect x="${x(state)}" y="${y(state)}" width="${BOX.w}" height="${BOX.h}" rx="8" fill="${alarm ? "#fbeaea" : problem ? "#fff6f0" : "#ffffff"}" stroke="${alarm ? "#c0504d" : state === d.selected ? "#1d2430" : "#9aa3b2"}" stroke-width="${alarm || state === d.selected ? 2.5 : 1}"${problem ? html` stroke-dasharray="${alarm ? "" : "4 3"}"` : ""}/>
<text x="${x(state) + BOX.w / 2}" y="${y(state) + 19}" text-anchor="middle" font-weight="600">${state}${state === d.graph.initial ? " ●" : ""}</text>
<text x="${x(state) + BOX.w / 2}" y="${y(state) + 36}" text-anchor="middle" fill="${alarm ? "#a02020" : "#4b5361"}" data-count="${count}">${count} actor${count === 1 ? "" : "s"}${problem ? " · problem" : ""}</text>
<title>${state}: ${count}${self.length === 0 ? "" : ` · also takes ${self.join(", ")}`}</title></g></a>`
  }
  return html`<svg role="img" aria-label="${d.kind} state diagram" class="diagram" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8a93a3"/></marker></defs>
${d.graph.edges.filter((e) => e.from !== e.to).map(edge)}
${d.graph.states.map(box)}
</svg>`
}
