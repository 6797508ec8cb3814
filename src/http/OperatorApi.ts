// /api/v1/operator: machine inspection, levers (each recorded: who, what, when, why), platform statistics and
// transactions by requester or provider, all behind the operator bearer token.
import { HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { AgentResource, TrustTier } from "../domain/Agent.js"
import { AttentionReport } from "../domain/Attention.js"
import { ConflictResponse, RateLimitedResponse, UnauthorizedResponse, UnavailableResponse } from "../domain/Errors.js"
import {
  ActionList,
  ActionListQuery,
  ActorDetail,
  ActorHistory,
  ActorList,
  ActorListQuery,
  ActorPath,
  AgentPath,
  ForceCircuitRequest,
  IdPath,
  KindCounts,
  KindPath,
  LeverRequest,
  OperatorAction,
  OperatorHeaders,
  OperatorStats,
  PageQuery,
  ProviderPath,
  RequesterPath,
  SetAgentStatusRequest,
  StatsQuery,
  TransactionList
} from "../domain/Operator.js"
import { ok } from "./Envelope.js"

export class OperatorAuth extends HttpApiMiddleware.Tag<OperatorAuth>()("OperatorAuth", {
  failure: Schema.Union(UnauthorizedResponse, RateLimitedResponse),
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const ReconciliationView = Schema.Struct({
  block: Schema.String,
  chainBalance: Schema.String,
  ledgerBalance: Schema.String,
  drift: Schema.String,
  checkedAt: Schema.String
})

const DriftedChannelView = Schema.Struct({
  channelId: Schema.String,
  balance: Schema.String,
  chainBalance: Schema.String,
  claimedCumulative: Schema.String,
  chainTotalClaimed: Schema.String
})

/**
 * One network's channel check (micro-USDC). receivable: the ledger's channel_receivable against Σ(charged − settled)
 * over every channel (one account for all networks); channels: each live row against the contract's channels(id),
 * `claimsInFlight` what our claims built and not yet on chain add up to; pending: the contract's claimed-unsettled pool
 * for our treasury against Σ(claimed − settled) less claims in flight. Drifts are chain (or ledger) minus rows.
 */
export const ChannelReconciliationView = Schema.Struct({
  network: Schema.String,
  block: Schema.String,
  ledgerReceivable: Schema.String,
  rowsReceivable: Schema.String,
  receivableDrift: Schema.String,
  channelsChecked: Schema.Number,
  channelsDrifted: Schema.Number,
  balanceDrift: Schema.String,
  claimedDrift: Schema.String,
  claimsInFlight: Schema.String,
  chainPending: Schema.String,
  rowsPending: Schema.String,
  pendingDrift: Schema.String,
  drifted: Schema.Array(DriftedChannelView),
  /** Stored checks only: the disagreement held at a later check. */
  confirmed: Schema.optional(Schema.Boolean),
  checkedAt: Schema.String
}).annotations({ identifier: "ChannelReconciliation" })

export const TreasuryReconciliation = Schema.Struct({
  /**
   * Compared now, at the latest block. `drift` is chain − (ledger + in flight): payments the chain settled by the block
   * that are booked with their outcome later (`inFlightIncoming`), payouts mined by the block whose receipts are not
   * booked yet (`inFlightOutgoing`).
   */
  current: Schema.extend(ReconciliationView, Schema.Struct({ inFlightIncoming: Schema.String, inFlightOutgoing: Schema.String })),
  /** The worker's last stored check; `confirmed` when the same block still disagreed after in-flight bookings landed. */
  lastCheck: Schema.NullOr(Schema.extend(ReconciliationView, Schema.Struct({ confirmed: Schema.Boolean }))),
  /** Batch-settlement channels, per network with channels: checked now, and the worker's last stored check of each. */
  channels: Schema.Struct({ current: Schema.Array(ChannelReconciliationView), lastChecks: Schema.Array(ChannelReconciliationView) })
}).annotations({ identifier: "TreasuryReconciliation" })

/** A lever: X-Operator names who pulls it, the body says why; the answer is the recorded action. */
const lever = <N extends string, P extends `/${string}`>(name: N, path: P, summary: string) =>
  HttpApiEndpoint.post(name, path)
    .setHeaders(OperatorHeaders)
    .setPayload(LeverRequest)
    .addSuccess(ok(OperatorAction))
    .addError(ConflictResponse)
    .annotate(OpenApi.Summary, summary)

export class OperatorApi extends HttpApiGroup.make("operator")
  .add(
    HttpApiEndpoint.post("setAgentStatus", "/agents/:id/status")
      .setPath(AgentPath)
      .setHeaders(OperatorHeaders)
      .setPayload(SetAgentStatusRequest)
      .addSuccess(ok(AgentResource))
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Suspend, reinstate or pause an agent (recorded; suspended: out of discovery and execution, its escrow frozen)")
  )
  .add(lever("suspendAgent", "/agents/:id/suspend", "Suspend an agent: out of discovery, executions answer AGENT_NOT_FOUND, its money stops being released").setPath(AgentPath))
  .add(lever("reinstateAgent", "/agents/:id/reinstate", "Reinstate a suspended agent: back in discovery; releases refused meanwhile are armed again").setPath(AgentPath))
  .add(
    lever(
      "refundFrozen",
      "/agents/:id/refund-frozen",
      "Refund a suspended agent's frozen money: every escrow of it still held goes back to its payer through the refund path (409 when not suspended or nothing is held)"
    ).setPath(AgentPath)
  )
  .add(
    HttpApiEndpoint.post("setTrustTier", "/agents/:id/trust-tier")
      .setPath(AgentPath)
      .setHeaders(OperatorHeaders)
      .setPayload(Schema.Struct({ tier: Schema.NullOr(TrustTier), ...LeverRequest.fields }).annotations({ identifier: "TrustTierRequest" }))
      .addSuccess(ok(AgentResource))
      .annotate(OpenApi.Summary, "Pin an agent's trust tier (null: back to the earned tier); recorded like a lever (X-Operator, reason)")
  )
  .add(lever("retrySettlement", "/settlements/:id/retry", "Retry a settlement waiting for its backoff (state retrying) now: the recovery worker takes it on its next pass").setPath(IdPath))
  .add(lever("retryRefund", "/refunds/:id/retry", "Send a pending refund (a failed attempt waiting for its next try) on the refund worker's next pass").setPath(IdPath))
  .add(lever("requeueDelivery", "/webhook-deliveries/:id/requeue", "Requeue a dead-lettered webhook delivery: a new delivery of the same event and body").setPath(IdPath))
  .add(
    HttpApiEndpoint.post("forceCircuit", "/circuits/:id/force")
      .setPath(AgentPath)
      .setHeaders(OperatorHeaders)
      .setPayload(ForceCircuitRequest)
      .addSuccess(ok(OperatorAction))
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Force an agent's circuit open (held until an operator closes it) or closed")
  )
  .add(
    HttpApiEndpoint.get("machineCounts", "/machines")
      .addSuccess(ok(Schema.Array(KindCounts)))
      .annotate(OpenApi.Summary, "Every machine kind with its actors counted per state")
  )
  .add(
    HttpApiEndpoint.get("listActors", "/machines/:kind")
      .setPath(KindPath)
      .setUrlParams(ActorListQuery)
      .addSuccess(ok(ActorList))
      .annotate(OpenApi.Summary, "Actors of a kind, optionally in one state, newest first (keyset pages: limit, cursor)")
  )
  .add(
    HttpApiEndpoint.get("kindCounts", "/machines/:kind/counts")
      .setPath(KindPath)
      .addSuccess(ok(KindCounts))
      .annotate(OpenApi.Summary, "A kind's actors counted per state (every state, zeros included)")
  )
  .add(
    HttpApiEndpoint.get("actor", "/machines/:kind/actors/:id")
      .setPath(ActorPath)
      .addSuccess(ok(ActorDetail))
      .annotate(OpenApi.Summary, "One actor: state, snapshot, summary, pending timers with their due times, operator actions")
  )
  .add(
    HttpApiEndpoint.get("actorHistory", "/machines/:kind/actors/:id/history")
      .setPath(ActorPath)
      .setUrlParams(PageQuery)
      .addSuccess(ok(ActorHistory))
      .annotate(OpenApi.Summary, "One actor's transitions, oldest first (event, from, to, time; the operator action behind one it caused)")
  )
  .add(
    HttpApiEndpoint.get("actions", "/actions")
      .setUrlParams(ActionListQuery)
      .addSuccess(ok(ActionList))
      .annotate(OpenApi.Summary, "Recorded operator actions, newest first (filter: machine, actorId)")
  )
  .add(
    HttpApiEndpoint.get("attention", "/attention")
      .addSuccess(ok(AttentionReport))
      .annotate(OpenApi.Summary, "What needs attention: every stuck or failing actor, most money at stake first, with its cause and lever; counts per kind")
  )
  .add(
    HttpApiEndpoint.get("stats", "/stats")
      .setUrlParams(StatsQuery)
      .addSuccess(ok(OperatorStats))
      .annotate(OpenApi.Summary, "Platform statistics with the fees collected (from the ledger), in total, by kind and by UTC day")
  )
  .add(
    HttpApiEndpoint.get("transactionsByRequester", "/transactions/requester/:requester")
      .setPath(RequesterPath)
      .setUrlParams(PageQuery)
      .addSuccess(ok(TransactionList))
      .annotate(OpenApi.Summary, "Transactions a wallet paid for, or that an agent requested inside chains, newest first")
  )
  .add(
    HttpApiEndpoint.get("transactionsByProvider", "/transactions/provider/:agentId")
      .setPath(ProviderPath)
      .setUrlParams(PageQuery)
      .addSuccess(ok(TransactionList))
      .annotate(OpenApi.Summary, "Transactions an agent provided, newest first")
  )
  .add(
    HttpApiEndpoint.get("treasuryReconciliation", "/treasury/reconciliation")
      .addSuccess(ok(TreasuryReconciliation))
      .addError(UnavailableResponse)
      .annotate(OpenApi.Summary, "Compare the ledger's treasury with the treasury's USDC on chain, and the channels' rows with the ledger and the channel contract (amounts in micro-USDC)")
  )
  .middleware(OperatorAuth)
  .prefix("/api/v1/operator") {}
