// Pure mappings of a chain to the wire: the nested tree of its calls and its cost (by kind, by agent, by depth).
import type { ChainCost, ChainNode, ChainView } from "../../src/domain/Chain.js"
import { formatUsdc } from "../../src/domain/Money.js"
import type { ChainRow, NodeRow } from "./Repo.js"

/** Money a call kept for good: held, released or disputed escrow (returned, refunded or void escrow cost nothing). */
export const charged = (node: Pick<NodeRow, "escrowStatus">) =>
  node.escrowStatus === "held" || node.escrowStatus === "released" || node.escrowStatus === "disputed"

const costOf = (node: NodeRow) => (charged(node) ? node.price : 0n)
const sum = (nodes: ReadonlyArray<NodeRow>, part: (n: NodeRow) => bigint) => nodes.reduce((total, n) => total + (charged(n) ? part(n) : 0n), 0n)

/** The nested tree from the root (a node whose parent is missing is hung under the root rather than lost). */
export const tree = (nodes: ReadonlyArray<NodeRow>): ChainNode | undefined => {
  const root = nodes.find((n) => n.depth === 0)
  if (root === undefined) return undefined
  const ids = new Set(nodes.map((n) => n.id))
  const childrenOf = new Map<string, Array<NodeRow>>()
  for (const n of nodes) {
    if (n === root) continue
    const parent = n.parentExecutionId !== null && ids.has(n.parentExecutionId) ? n.parentExecutionId : root.id
    childrenOf.set(parent, [...(childrenOf.get(parent) ?? []), n])
  }
  const build = (n: NodeRow): ChainNode => ({
    transactionId: n.transactionId,
    requestId: n.id,
    agentId: n.agentId,
    agentName: n.agentName,
    capabilityId: n.capabilityId,
    status: n.status,
    depth: n.depth,
    cost: formatUsdc(costOf(n)),
    executionTimeMs: n.executionTimeMs,
    startedAt: n.createdAt.toISOString(),
    completedAt: n.completedAt?.toISOString() ?? null,
    children: (childrenOf.get(n.id) ?? []).map(build)
  })
  return build(root)
}

export const chainView = (
  chain: ChainRow,
  nodes: ReadonlyArray<NodeRow>,
  root: ChainNode,
  refund: ChainView["refund"]
): ChainView => {
  const starts = nodes.map((n) => n.createdAt.getTime())
  const ends = nodes.map((n) => n.completedAt?.getTime() ?? n.createdAt.getTime() + (n.executionTimeMs ?? 0))
  return {
    chainId: chain.id,
    rootTransactionId: root.transactionId,
    status: chain.status,
    totalBudget: formatUsdc(chain.totalBudget),
    remainingBudget: formatUsdc(chain.remaining),
    totalCost: formatUsdc(sum(nodes, (n) => n.price)),
    totalExecutionTimeMs: starts.length === 0 ? 0 : Math.max(0, Math.max(...ends) - Math.min(...starts)),
    maxDepthReached: Math.max(0, ...nodes.map((n) => n.depth)),
    maxDepth: chain.maxDepth,
    nodeCount: nodes.length,
    tree: root,
    refund,
    startedAt: chain.startedAt.toISOString(),
    completedAt: chain.completedAt?.toISOString() ?? null
  }
}

/** The cost, split three ways; every amount is a sum over the calls the chain paid for (see `charged`). */
export const costView = (chain: ChainRow, nodes: ReadonlyArray<NodeRow>, rootTransactionId: string): ChainCost => {
  const agents = [...new Set(nodes.map((n) => n.agentId))]
  const depths = [...new Set(nodes.map((n) => n.depth))].sort((a, b) => a - b)
  return {
    chainId: chain.id,
    rootTransactionId,
    totalCost: formatUsdc(sum(nodes, (n) => n.price)),
    breakdown: {
      platformFees: formatUsdc(sum(nodes, (n) => n.platformFee)),
      agentFees: formatUsdc(sum(nodes, (n) => n.agentFee)),
      platformCuts: formatUsdc(sum(nodes, (n) => n.platformCut))
    },
    byAgent: agents.map((agentId) => {
      const mine = nodes.filter((n) => n.agentId === agentId)
      return {
        agentId,
        agentName: mine[0]?.agentName ?? "",
        executionCount: mine.length,
        totalCost: formatUsdc(sum(mine, (n) => n.price)),
        earnings: formatUsdc(sum(mine, (n) => n.agentEarnings))
      }
    }),
    byDepth: depths.map((depth) => {
      const level = nodes.filter((n) => n.depth === depth)
      return { depth, nodeCount: level.length, totalCost: formatUsdc(sum(level, (n) => n.price)) }
    }),
    totalBudget: formatUsdc(chain.totalBudget),
    refunded: formatUsdc(chain.refundAmount ?? 0n)
  }
}
