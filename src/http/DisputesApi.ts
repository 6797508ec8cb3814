// /api/v1/disputes (free): file, read, respond, evidence, timeline; /api/v1/operator/disputes: the platform's queue and decisions.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { AgentDisputes, Dispute, DisputeAnswer, DisputeListQuery, DisputeOpened, EvidenceAccepted, EvidenceList, EvidenceRequest, OpenDisputeRequest, OperatorDisputes, ResolveRequest, RespondRequest, Timeline } from "../domain/Dispute.js"
import { ConflictResponse, ForbiddenResponse, UnauthorizedResponse } from "../domain/Errors.js"
import { AgentId } from "../domain/Ids.js"
import { WalletSignatureHeaders } from "./AgentsApi.js"
import { ok } from "./Envelope.js"
import { OperatorHeaders } from "../domain/Operator.js"
import { OperatorAuth } from "./OperatorApi.js"

const DisputePath = Schema.Struct({ id: Schema.String.pipe(Schema.pattern(/^dsp_[A-Za-z0-9_-]{1,64}$/)) })
const ClientIdHeader = Schema.Struct({ "x-client-id": Schema.optional(Schema.String) })

export class DisputesApi extends HttpApiGroup.make("disputes")
  .add(
    HttpApiEndpoint.post("open", "/")
      .setPayload(OpenDisputeRequest)
      .setHeaders(ClientIdHeader)
      .addSuccess(ok(DisputeOpened), { status: 201 })
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Dispute a paid transaction within 24 hours (X-Client-Id from the paid response); the payment is frozen")
  )
  .add(
    HttpApiEndpoint.get("byAgent", "/agent/:agentId")
      .setPath(Schema.Struct({ agentId: AgentId }))
      .setUrlParams(DisputeListQuery)
      .addSuccess(ok(AgentDisputes))
      .annotate(OpenApi.Summary, "An agent's disputes with a summary (won/lost from the agent's side)")
  )
  .add(HttpApiEndpoint.get("get", "/:id").setPath(DisputePath).addSuccess(ok(Dispute)).annotate(OpenApi.Summary, "One dispute, full view"))
  .add(
    HttpApiEndpoint.post("respond", "/:id/respond")
      .setPath(DisputePath)
      .setPayload(RespondRequest)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(DisputeAnswer))
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "The disputed agent's response (its wallet signature); stops the 48-hour escalation")
  )
  .add(
    HttpApiEndpoint.post("addEvidence", "/:id/evidence")
      .setPath(DisputePath)
      .setPayload(EvidenceRequest)
      .setHeaders(Schema.Struct({ ...WalletSignatureHeaders.fields, ...ClientIdHeader.fields }))
      .addSuccess(ok(EvidenceAccepted), { status: 201 })
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Evidence as the agent (wallet signature) or the client (X-Client-Id); 10 per party")
  )
  .add(HttpApiEndpoint.get("evidence", "/:id/evidence").setPath(DisputePath).addSuccess(ok(EvidenceList)).annotate(OpenApi.Summary, "A dispute's evidence"))
  .add(HttpApiEndpoint.get("timeline", "/:id/timeline").setPath(DisputePath).addSuccess(ok(Timeline)).annotate(OpenApi.Summary, "A dispute's timeline"))
  .prefix("/api/v1/disputes") {}

export class OperatorDisputesApi extends HttpApiGroup.make("operatorDisputes")
  .add(
    HttpApiEndpoint.get("list", "/")
      .setUrlParams(DisputeListQuery)
      .addSuccess(ok(OperatorDisputes))
      .annotate(OpenApi.Summary, "Disputes by status, oldest first (the platform's queue)")
  )
  .add(
    HttpApiEndpoint.post("resolve", "/:id/resolve")
      .setPath(DisputePath)
      .setHeaders(OperatorHeaders)
      .setPayload(ResolveRequest)
      .addSuccess(ok(Dispute))
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Resolve a dispute for the agent, the client, or split (clientShareBps); once")
  )
  .middleware(OperatorAuth)
  .prefix("/api/v1/operator/disputes") {}
