// Chains on the wire: the traced tree, its cost, and the budget check (spec sections 2 and 4).
import { Schema } from "effect"
import { AgentId } from "./Ids.js"

export const ChainStatus = Schema.Literal("pending", "running", "completed", "failed", "partial")

export interface ChainNode {
  readonly transactionId: string
  readonly requestId: string
  readonly agentId: string
  readonly agentName: string
  readonly capabilityId: string
  readonly status: string
  readonly depth: number
  readonly cost: string
  readonly executionTimeMs: number | null
  readonly startedAt: string
  readonly completedAt: string | null
  readonly children: ReadonlyArray<ChainNode>
}

export const ChainNode: Schema.Schema<ChainNode> = Schema.Struct({
  transactionId: Schema.String,
  requestId: Schema.String,
  agentId: Schema.String,
  agentName: Schema.String,
  capabilityId: Schema.String,
  status: Schema.String,
  depth: Schema.Number,
  /** What the chain paid for this call in the end: its price, or 0 when it failed and its money went back. */
  cost: Schema.String,
  executionTimeMs: Schema.NullOr(Schema.Number),
  startedAt: Schema.String,
  completedAt: Schema.NullOr(Schema.String),
  children: Schema.Array(Schema.suspend((): Schema.Schema<ChainNode> => ChainNode))
}).annotations({ identifier: "ChainNode" })

export const RefundView = Schema.Struct({
  amount: Schema.String,
  status: Schema.String,
  txHash: Schema.NullOr(Schema.String)
}).annotations({ identifier: "ChainRefund" })

export const ChainView = Schema.Struct({
  chainId: Schema.String,
  rootTransactionId: Schema.String,
  status: ChainStatus,
  totalBudget: Schema.String,
  remainingBudget: Schema.String,
  totalCost: Schema.String,
  /** From the first call's start to the last call's end. */
  totalExecutionTimeMs: Schema.Number,
  maxDepthReached: Schema.Number,
  maxDepth: Schema.Number,
  nodeCount: Schema.Number,
  tree: ChainNode,
  refund: Schema.NullOr(RefundView),
  startedAt: Schema.String,
  completedAt: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Chain" })
export type ChainView = typeof ChainView.Type

export const ChainCost = Schema.Struct({
  chainId: Schema.String,
  rootTransactionId: Schema.String,
  totalCost: Schema.String,
  breakdown: Schema.Struct({ platformFees: Schema.String, agentFees: Schema.String, platformCuts: Schema.String }),
  byAgent: Schema.Array(Schema.Struct({
    agentId: Schema.String,
    agentName: Schema.String,
    executionCount: Schema.Number,
    totalCost: Schema.String,
    earnings: Schema.String
  })),
  byDepth: Schema.Array(Schema.Struct({ depth: Schema.Number, nodeCount: Schema.Number, totalCost: Schema.String })),
  totalBudget: Schema.String,
  refunded: Schema.String
}).annotations({ identifier: "ChainCost" })
export type ChainCost = typeof ChainCost.Type

export const BudgetCheckRequest = Schema.Struct({
  targetAgentId: AgentId,
  capabilityId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  estimatedDepth: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 5)), { exact: true }),
  includeSubAgentCosts: Schema.optionalWith(Schema.Boolean, { exact: true })
}).annotations({ identifier: "BudgetCheckRequest", parseOptions: { errors: "all" } })
export type BudgetCheckRequest = typeof BudgetCheckRequest.Type

export const BudgetCheck = Schema.Struct({
  estimatedTotal: Schema.String,
  breakdown: Schema.Struct({
    directCost: Schema.String,
    platformFees: Schema.String,
    estimatedSubAgentCosts: Schema.String,
    contingency: Schema.String
  }),
  capability: Schema.Struct({ id: Schema.String, name: Schema.String, basePrice: Schema.String }),
  warnings: Schema.Array(Schema.String),
  recommendedBudget: Schema.String,
  /** Where the sub-agent estimate came from: this agent's past chains, or the documented heuristic. */
  estimateSource: Schema.Literal("history", "heuristic")
}).annotations({ identifier: "BudgetCheck" })
export type BudgetCheck = typeof BudgetCheck.Type
