// The budget a chain would need (POST /api/v1/chains/budget-check, MCP check_chain_budget): the paid-call pipeline's
// checks before payment (services/executions), then the chain's estimate (services/chains). Sits above both features.
import { Effect } from "effect"
import type { BudgetCheckRequest } from "../../src/domain/Chain.js"
import { Chains } from "../chains/Chains.js"
import { Executions } from "../executions/Executions.js"

export const budgetCheck = Effect.gen(function* () {
  const chains = yield* Chains
  const executions = yield* Executions
  return (req: BudgetCheckRequest) =>
    executions.admit({ targetAgentId: req.targetAgentId, capabilityId: req.capabilityId, input: req.input }).pipe(
      Effect.flatMap((admitted) => chains.budgetCheck(req, admitted))
    )
})
