// /api/v1/operator: platform actions behind the operator bearer token.
import { HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { AgentResource, TrustTier } from "../domain/Agent.js"
import { UnauthorizedResponse, UnavailableResponse } from "../domain/Errors.js"
import { AgentId } from "../domain/Ids.js"
import { ok } from "./Envelope.js"

export class OperatorAuth extends HttpApiMiddleware.Tag<OperatorAuth>()("OperatorAuth", {
  failure: UnauthorizedResponse,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const AgentPath = Schema.Struct({ id: AgentId })

const ReconciliationView = Schema.Struct({
  block: Schema.String,
  chainBalance: Schema.String,
  ledgerBalance: Schema.String,
  drift: Schema.String,
  checkedAt: Schema.String
})

export const TreasuryReconciliation = Schema.Struct({
  /** Compared now, at the latest block (in-flight bookings can show as a passing difference). */
  current: ReconciliationView,
  /** The worker's last stored check; `confirmed` when the same block still disagreed after in-flight bookings landed. */
  lastCheck: Schema.NullOr(Schema.extend(ReconciliationView, Schema.Struct({ confirmed: Schema.Boolean })))
}).annotations({ identifier: "TreasuryReconciliation" })

export class OperatorApi extends HttpApiGroup.make("operator")
  .add(
    HttpApiEndpoint.post("setAgentStatus", "/agents/:id/status")
      .setPath(AgentPath)
      .setPayload(Schema.Struct({
        status: Schema.Literal("active", "inactive", "suspended"),
        reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1000)))
      }))
      .addSuccess(ok(AgentResource))
      .annotate(OpenApi.Summary, "Suspend, reinstate or pause an agent")
  )
  .add(
    HttpApiEndpoint.post("setTrustTier", "/agents/:id/trust-tier")
      .setPath(AgentPath)
      .setPayload(Schema.Struct({ tier: Schema.NullOr(TrustTier) }))
      .addSuccess(ok(AgentResource))
      .annotate(OpenApi.Summary, "Pin an agent's trust tier (null: back to the earned tier)")
  )
  .add(
    HttpApiEndpoint.get("treasuryReconciliation", "/treasury/reconciliation")
      .addSuccess(ok(TreasuryReconciliation))
      .addError(UnavailableResponse)
      .annotate(OpenApi.Summary, "Compare the ledger's treasury with the treasury's USDC on chain (amounts in micro-USDC)")
  )
  .middleware(OperatorAuth)
  .prefix("/api/v1/operator") {}
