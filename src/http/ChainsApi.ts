// /api/v1/chains (free): a chain's traced tree and its cost, by root transaction id or chain id; the budget check.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BudgetCheck, BudgetCheckRequest, ChainCost, ChainView } from "../domain/Chain.js"
import { ok } from "./Envelope.js"

/** The spec names the path parameter a root transaction id and a UUID at once: both are served. */
export const ChainPath = Schema.Struct({
  id: Schema.String.pipe(
    Schema.pattern(/^(tx_[A-Za-z0-9_-]{8,64}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$/, {
      message: () => "must be a root transaction id (tx_…) or a chain id (UUID)"
    })
  )
})

export class ChainsApi extends HttpApiGroup.make("chains")
  .add(
    HttpApiEndpoint.post("budgetCheck", "/budget-check")
      .setPayload(BudgetCheckRequest)
      .addSuccess(ok(BudgetCheck))
      .annotate(OpenApi.Summary, "Estimate the budget of a chain rooted at a call (free)")
      .annotate(
        OpenApi.Description,
        "Validated like an execution (agent, capability, input). Sub-agent costs per level come from what this agent's last 50 finished chains spent at that level (mean per chain); without any, each level is assumed to make one call at this call's price. Contingency 20%; recommendedBudget is the estimate plus 50%, within 0.01-1000.00."
      )
  )
  .add(
    HttpApiEndpoint.get("status", "/:id")
      .setPath(ChainPath)
      .addSuccess(ok(ChainView))
      .annotate(OpenApi.Summary, "A chain: status, totals and the nested tree of its calls (free)")
      .annotate(
        OpenApi.Description,
        "`:id` is the root execution's transaction id (tx_…, in every chained response) or the chain id (UUID, `chain.chainId`). A node's cost is what the chain paid for it in the end (0 for a failed sub-call, whose reservation went back to the budget)."
      )
  )
  .add(
    HttpApiEndpoint.get("cost", "/:id/cost")
      .setPath(ChainPath)
      .addSuccess(ok(ChainCost))
      .annotate(OpenApi.Summary, "What a chain cost: by kind, by agent and by depth; sums agree with the ledger (free)")
  )
  .prefix("/api/v1/chains") {}
