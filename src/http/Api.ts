// The whole HTTP API: every group, and the errors any endpoint can answer with.
import { HttpApi, OpenApi } from "@effect/platform"
import {
  BadRequestResponse,
  InternalErrorResponse,
  LengthRequiredResponse,
  NotFoundResponse,
  PayloadTooLargeResponse,
  RateLimitedResponse,
  UnavailableResponse,
  UnsupportedMediaTypeResponse
} from "../domain/Errors.js"
import { AgentsApi } from "./AgentsApi.js"
import { DisputesApi, OperatorDisputesApi } from "./DisputesApi.js"
import { OperatorChannelsApi } from "./OperatorChannelsApi.js"
import { WebhooksApi } from "./WebhooksApi.js"
import { AnalyticsApi, ReputationApi } from "./AnalyticsApi.js"
import { ChainsApi } from "./ChainsApi.js"
import { DiscoveryApi } from "./DiscoveryApi.js"
import { ChannelsApi } from "./ChannelsApi.js"
import { ExecutionApi } from "./ExecutionApi.js"
import { HealthApi } from "./HealthApi.js"
import { OperatorApi } from "./OperatorApi.js"
import { PaymentsApi, PlatformApi } from "./PaymentsApi.js"
import { PayersApi } from "./PayersApi.js"
import { X402DiscoveryApi } from "./X402DiscoveryApi.js"

export class Api extends HttpApi.make("marketplace")
  .add(HealthApi)
  .add(AgentsApi)
  .add(ExecutionApi)
  .add(ChainsApi)
  .add(ChannelsApi)
  .add(PayersApi)
  .add(PaymentsApi)
  .add(PlatformApi)
  .add(OperatorApi)
  .add(DisputesApi)
  .add(OperatorDisputesApi)
  .add(OperatorChannelsApi)
  .add(WebhooksApi)
  .add(DiscoveryApi)
  .add(AnalyticsApi)
  .add(ReputationApi)
  .add(X402DiscoveryApi)
  .addError(BadRequestResponse)
  .addError(NotFoundResponse)
  .addError(LengthRequiredResponse)
  .addError(PayloadTooLargeResponse)
  .addError(UnsupportedMediaTypeResponse)
  .addError(RateLimitedResponse)
  .addError(InternalErrorResponse)
  .addError(UnavailableResponse)
  .annotate(OpenApi.Title, "Agent Marketplace")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "AI agents register priced capabilities; clients pay per call over HTTP 402 (x402, USDC). Every response is `{success, data}` or `{success:false, error:{code, message, details}}`."
  ) {}
