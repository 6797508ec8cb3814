// Reading chains: the traced tree and its cost (by chain id or root transaction id), and the budget a chain would need.
import { SqlClient } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Effect, Option } from "effect"
import type { BudgetCheck, BudgetCheckRequest, ChainView } from "../../src/domain/Chain.js"
import { NotFound } from "../../src/domain/Errors.js"
import { EXECUTION_PLATFORM_FEE, formatUsdc } from "../../src/domain/Money.js"
import { priceOf } from "../../src/domain/Pricing.js"
import type { AgentRecord, Capability } from "../../src/domain/Agent.js"
import { estimate, MAX_CHAIN_BUDGET, MIN_CHAIN_BUDGET, subAgentCosts } from "./budget.js"
import { MIN_CHAIN_REPUTATION } from "./Children.js"
import { ChainsRepo } from "./Repo.js"
import * as View from "./View.js"

/** How many of an agent's latest finished chains the budget check learns from. */
export const HISTORY_CHAINS = 50

export class Chains extends Effect.Service<Chains>()("chains/Chains", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ChainsRepo

    const load = (key: string) =>
      Effect.gen(function* () {
        const chain = yield* repo.findByKey(key)
        if (Option.isNone(chain)) return yield* new NotFound({ code: "CHAIN_NOT_FOUND", message: `no chain ${key}`, details: { id: key } })
        const nodes = yield* repo.nodes(chain.value.id)
        const root = View.tree(nodes)
        if (root === undefined) return yield* Effect.dieMessage(`chain ${chain.value.id} has no root execution`)
        return { chain: chain.value, nodes, root }
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    /** The chain with its nested tree, status and totals. */
    const status = (key: string) =>
      Effect.gen(function* () {
        const { chain, nodes, root } = yield* load(key)
        const [refund] = yield* sql<{ amount: string; status: string; txHash: string | null }>`
          SELECT amount::text AS amount, status, tx_hash FROM refunds WHERE chain_id = ${chain.id}`.pipe(Effect.orDie)
        const refundView: ChainView["refund"] = refund === undefined ? null : { amount: formatUsdc(BigInt(refund.amount)), status: refund.status, txHash: refund.txHash }
        return View.chainView(chain, nodes, root, refundView)
      }).pipe(withSpan("Chains.status"))

    const cost = (key: string) =>
      Effect.map(load(key), ({ chain, nodes, root }) => View.costView(chain, nodes, root.transactionId)).pipe(withSpan("Chains.cost"))

    /**
     * What a chain rooted at this call would cost: the call itself, and below it what this agent's past chains spent
     * per level (or the heuristic when it has none), plus 20% contingency; recommended: the estimate plus 50%.
     */
    /** `admitted`: the agent and capability as the paid-call pipeline's checks before payment found them. */
    const budgetCheck = (req: BudgetCheckRequest, admitted: { readonly agent: AgentRecord; readonly capability: Capability }) =>
      Effect.gen(function* () {
        const { agent, capability } = admitted
        const depth = req.estimatedDepth ?? 1
        const agentFee = capability.pricing.basePrice
        const history = yield* repo.spentByDepth(agent.id, HISTORY_CHAINS).pipe(Effect.orDie)
        const sub = req.includeSubAgentCosts === false ? { amount: 0n, source: history.chains > 0 ? "history" as const : "heuristic" as const } : subAgentCosts(depth, priceOf(agentFee), history)
        const e = estimate(agentFee, EXECUTION_PLATFORM_FEE, sub.amount)
        const settings = agent.chainSettings
        const warnings = [
          ...(settings.chain_enabled ? [] : ["the agent has chaining disabled: it cannot start a chain (X-Chain-Budget is refused) nor be hired inside one"]),
          ...(settings.chain_enabled && depth > settings.chain_max_depth
            ? [`estimatedDepth ${depth} is beyond the agent's chain_max_depth ${settings.chain_max_depth}: sub-calls deeper than that are refused`]
            : []),
          ...(agent.reputationScore < MIN_CHAIN_REPUTATION ? [`the agent's reputation is below ${MIN_CHAIN_REPUTATION}: it cannot be hired inside a chain`] : []),
          ...(req.includeSubAgentCosts !== false && depth > 0 && sub.source === "heuristic"
            ? ["no finished chains of this agent to learn from: sub-agent costs assume one call per level at this call's price"]
            : []),
          ...(e.recommendedBudget > MAX_CHAIN_BUDGET ? [`the recommended budget is above the ${formatUsdc(MAX_CHAIN_BUDGET)} USDC maximum`] : [])
        ]
        const recommended = e.recommendedBudget < MIN_CHAIN_BUDGET ? MIN_CHAIN_BUDGET : e.recommendedBudget > MAX_CHAIN_BUDGET ? MAX_CHAIN_BUDGET : e.recommendedBudget
        return {
          estimatedTotal: formatUsdc(e.estimatedTotal),
          breakdown: {
            directCost: formatUsdc(e.directCost),
            platformFees: formatUsdc(e.platformFees),
            estimatedSubAgentCosts: formatUsdc(e.estimatedSubAgentCosts),
            contingency: formatUsdc(e.contingency)
          },
          capability: { id: capability.id, name: capability.name, basePrice: formatUsdc(agentFee) },
          warnings,
          recommendedBudget: formatUsdc(recommended),
          estimateSource: sub.source
        } satisfies BudgetCheck
      }).pipe(withSpan("Chains.budgetCheck"))

    return { status, cost, budgetCheck } as const
  }),
  dependencies: [ChainsRepo.Default]
}) {}
