// Chain budgets at the edge: the X-Chain-Budget header (spec section 8 limits) and the budget-check estimate (pure).
import { Either, Option } from "effect"
import { formatUsdc, MICROS_PER_USDC, parseUsdc } from "../../src/domain/Money.js"

export const MIN_CHAIN_BUDGET = MICROS_PER_USDC / 100n // 0.01
export const MAX_CHAIN_BUDGET = 1_000n * MICROS_PER_USDC
export const DEFAULT_CHAIN_BUDGET = 10n * MICROS_PER_USDC

/** None: no header, not a chain. The header present but empty or `default` is 10.00; otherwise 0.01 to 1,000.00 USDC. */
export const parseChainBudget = (header: string | undefined): Either.Either<Option.Option<bigint>, string> => {
  if (header === undefined) return Either.right(Option.none())
  const value = header.trim()
  if (value === "" || value.toLowerCase() === "default") return Either.right(Option.some(DEFAULT_CHAIN_BUDGET))
  return Option.match(parseUsdc(value), {
    onNone: () => Either.left(`X-Chain-Budget must be a USDC amount such as "5.00" (or empty or "default" for ${formatUsdc(DEFAULT_CHAIN_BUDGET)})`),
    onSome: (budget) =>
      budget < MIN_CHAIN_BUDGET || budget > MAX_CHAIN_BUDGET
        ? Either.left(`X-Chain-Budget must be between ${formatUsdc(MIN_CHAIN_BUDGET)} and ${formatUsdc(MAX_CHAIN_BUDGET)} USDC`)
        : Either.right(Option.some(budget))
  })
}

/**
 * Fallback when an agent has no finished chains to learn from: each level below the root is assumed to make one call
 * costing what the root call costs (docs/chains.md "budget-check").
 */
export const HEURISTIC_CALLS_PER_LEVEL = 1n

export interface Estimate {
  readonly directCost: bigint
  readonly platformFees: bigint
  readonly estimatedSubAgentCosts: bigint
  readonly contingency: bigint
  readonly estimatedTotal: bigint
  readonly recommendedBudget: bigint
}

/** 20% contingency on top of the costs; the recommended budget is the estimate plus 50% (spec, Chains rule 3). */
export const estimate = (agentFee: bigint, platformFee: bigint, subAgentCosts: bigint): Estimate => {
  const costs = agentFee + platformFee + subAgentCosts
  const contingency = costs / 5n
  const estimatedTotal = costs + contingency
  return {
    directCost: agentFee,
    platformFees: platformFee,
    estimatedSubAgentCosts: subAgentCosts,
    contingency,
    estimatedTotal,
    recommendedBudget: estimatedTotal + estimatedTotal / 2n
  }
}

/**
 * Sub-agent costs for `depth` levels below the root: the mean of what this agent's past chains spent at each level when
 * there are any (`history`), else the heuristic (one call per level at the root call's price).
 */
export const subAgentCosts = (
  depth: number,
  rootPrice: bigint,
  history: { readonly chains: number; readonly byDepth: ReadonlyArray<{ readonly depth: number; readonly spent: bigint }> }
): { readonly amount: bigint; readonly source: "history" | "heuristic" } => {
  if (depth <= 0) return { amount: 0n, source: history.chains > 0 ? "history" : "heuristic" }
  if (history.chains === 0) return { amount: BigInt(depth) * HEURISTIC_CALLS_PER_LEVEL * rootPrice, source: "heuristic" }
  let amount = 0n
  for (let level = 1; level <= depth; level++) {
    const spent = history.byDepth.find((d) => d.depth === level)?.spent ?? 0n
    amount += spent / BigInt(history.chains)
  }
  return { amount, source: "history" }
}
