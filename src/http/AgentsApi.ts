// /api/v1/agents: registration (paid), reads, owner updates and deactivation, wallet lookup.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { AgentResource, RegisterAgentRequest, UpdateAgentRequest } from "../domain/Agent.js"
import { ConflictResponse, ForbiddenResponse, PaymentRequiredResponse, UnauthorizedResponse } from "../domain/Errors.js"
import { AgentId, Wallet } from "../domain/Ids.js"
import { ok } from "./Envelope.js"
import { PaymentHeaderFields } from "./PaymentHeaders.js"

const PaymentHeaders = Schema.Struct(PaymentHeaderFields)

export const WalletSignatureHeaders = Schema.Struct({
  "x-agent-wallet": Schema.optional(Schema.String),
  "x-agent-signature": Schema.optional(Schema.String)
})

const AgentPath = Schema.Struct({ id: AgentId })

export const Registration = Schema.Struct({
  id: AgentId,
  wallet: Schema.String,
  name: Schema.String,
  status: Schema.Literal("active"),
  registrationTxId: Schema.String.annotations({ description: "Hash of the on-chain transaction that settled the registration fee" })
}).annotations({ identifier: "Registration" })

export const CacheMeta = Schema.Struct({ cached: Schema.Boolean, cacheSource: Schema.Literal("memory", "database") })

export class AgentsApi extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.post("register", "/")
      .setPayload(RegisterAgentRequest)
      .setHeaders(PaymentHeaders)
      .addSuccess(ok(Registration), { status: 201 })
      .addError(PaymentRequiredResponse)
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Register an agent (0.10 USDC via x402: PAYMENT-SIGNATURE v2 or X-PAYMENT v1)")
      .annotate(
        OpenApi.Description,
        "Validates everything first (a bad request is never charged), answers 402 with the x402 challenge without payment (v1 JSON body and v2 PAYMENT-REQUIRED header), then verifies and settles the payment on chain. The fee is paid from the agent's own wallet, or by another wallet with `walletProof`, the agent wallet's EIP-712 signature over the registration (docs/clients.md); otherwise 403 WALLET_NOT_CONTROLLED and nothing is charged. The very same request re-sent with the very same payment header answers the agent it registered. The receipt comes back as PAYMENT-RESPONSE (v2) or X-PAYMENT-RESPONSE (v1)."
      )
  )
  .add(
    HttpApiEndpoint.get("checkWallet", "/check-wallet/:wallet")
      .setPath(Schema.Struct({ wallet: Wallet }))
      .addSuccess(ok(Schema.Struct({ exists: Schema.Boolean, agentId: Schema.optional(Schema.String) })))
      .annotate(OpenApi.Summary, "Is a wallet registered?")
  )
  .add(
    HttpApiEndpoint.get("get", "/:id")
      .setPath(AgentPath)
      .addSuccess(Schema.Struct({ success: Schema.Literal(true), data: AgentResource, meta: CacheMeta }))
      .annotate(OpenApi.Summary, "Read an agent")
  )
  .add(
    HttpApiEndpoint.patch("update", "/:id")
      .setPath(AgentPath)
      .setHeaders(WalletSignatureHeaders)
      .setPayload(UpdateAgentRequest)
      .addSuccess(ok(AgentResource))
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .annotate(OpenApi.Summary, "Update an agent (wallet signature)")
  )
  .add(
    HttpApiEndpoint.del("deactivate", "/:id")
      .setPath(AgentPath)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Struct({ id: AgentId, status: Schema.Literal("inactive") })))
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .annotate(OpenApi.Summary, "Deactivate an agent (wallet signature); no data is removed")
  )
  .prefix("/api/v1/agents") {}
