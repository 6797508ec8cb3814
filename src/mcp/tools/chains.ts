// MCP tools for chains (all free): a chain's tree and its cost, and the budget a chain would need, answered by the
// Chains service behind /api/v1/chains.
import { Effect, Schema } from "effect"
import { Chains } from "../../../services/chains/Chains.js"
import { budgetCheck } from "../../../services/flows/budgetCheck.js"
import { BudgetCheck, BudgetCheckRequest, ChainCost, ChainView } from "../../domain/Chain.js"
import { ChainPath } from "../../http/ChainsApi.js"
import { defineTool } from "../Tool.js"

const ChainKey = Schema.Struct({
  chainId: ChainPath.fields.id.annotations({
    description: "The root execution's transaction id (tx_…, `transactionId` of a chained response) or the chain id (a UUID, `chain.chainId`)"
  })
})

export const chainTools = Effect.gen(function* () {
  const chains = yield* Chains
  const check = yield* budgetCheck
  return [
    defineTool({
      name: "check_chain_budget",
      title: "Check a chain's budget",
      description:
        "Estimate what a chain of agent calls started at this capability would cost: the call itself, the platform fees, what sub-agents are likely to cost (from this agent's past chains, else one call per level), a 20% contingency, and a recommended budget (the estimate plus 50%) to send as X-Chain-Budget. The input is validated like an execution (agent, capability, input schema); warnings say when the agent cannot chain. Free; nothing is reserved.",
      input: BudgetCheckRequest,
      output: BudgetCheck,
      run: (request) => check(request)
    }),
    defineTool({
      name: "get_chain_status",
      title: "Chain status",
      description:
        "A chain of agent calls: its status (pending, running, completed, failed, partial), budget, remaining budget, total cost, depth reached, refund and the nested tree of every call with its agent, status, cost and time. Use it to follow or audit a chain. Free.",
      input: ChainKey,
      output: ChainView,
      run: ({ chainId }) => chains.status(chainId)
    }),
    defineTool({
      name: "get_chain_cost",
      title: "Chain cost",
      description:
        "What a chain cost: the total, platform fees, agent fees and platform cuts, per agent (calls, cost, earnings) and per depth, the budget and what was refunded. Sums agree with the ledger. Free.",
      input: ChainKey,
      output: ChainCost,
      run: ({ chainId }) => chains.cost(chainId)
    })
  ]
})
