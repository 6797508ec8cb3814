// The seams issue 28 drew: the paid-call pipeline and chains do not import each other, and a table is written in its
// owner's folder only (docs/architecture.md, "Who writes which table").
import { describe, expect, it } from "vitest"
import { serviceImports, tableWriters } from "../../src/tools/importGraph.js"

describe("feature seams", () => {
  it("no file under services/executions imports services/chains, and no file under services/chains imports services/executions", () => {
    const crossing = serviceImports().filter((e) =>
      (e.from === "services/executions" && e.to === "services/chains") || (e.from === "services/chains" && e.to === "services/executions"))
    expect(crossing).toEqual([])
  })

  it("every table but agents (a row whose column groups belong to agents, reputation and circuits) is written by one folder", () => {
    const shared = [...tableWriters()].filter(([, writers]) => writers.size > 1).map(([table, writers]) => [table, [...writers].sort()])
    expect(shared).toEqual([["agents", ["services/agents", "services/circuits", "services/reputation"]]])
  })
})
