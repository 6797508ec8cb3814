// The paid MCP tools, paid the way x402's MCP transport says (payment in `_meta["x402/payment"]`, receipt in the
// result's `_meta["x402/payment-response"]`): agent registration and hiring an agent, on the same services (and so
// the same validation-before-payment, escrow, idempotency and refunds) as POST /api/v1/agents and /api/v1/execute.
import { Effect, Schema } from "effect"
import { AppConfig } from "../../../layers/Config.js"
import { presentedFromV2Payload } from "../../../layers/x402/credential.js"
import { AgentRegistration } from "../../../services/agents/Registration.js"
import { Executions } from "../../../services/executions/Executions.js"
import type { PaymentUse } from "../../../services/executions/outcome.js"
import { Paywall } from "../../../services/payments/Paywall.js"
import { RegisterAgentRequest } from "../../domain/Agent.js"
import { Accepted, ExecuteRequest, ExecutionView } from "../../domain/Execution.js"
import { Registration } from "../../http/AgentsApi.js"
import { channelSettleResponse } from "../../../layers/x402/batchSettlement/response.js"
import { asX402Challenge, PAYMENT_META, PAYMENT_RESPONSE_META } from "../payment.js"
import { FailureWithMeta, type ToolFailure } from "../results.js"
import { defineTool, WithMeta } from "../Tool.js"

const paymentUsed = Schema.String.annotations({
  description: "The payment's handle (the PAYMENT-SIGNATURE value of the payload you sent): pass it as `payment` to get_execution_status to read the output again, or as PAYMENT-SIGNATURE to GET /api/v1/execute/:requestId or POST …/retry"
})

const PaidExecution = Schema.Struct({ ...ExecutionView.fields, paymentUsed }).annotations({ identifier: "PaidExecution" })
const AcceptedPaidExecution = Schema.Struct({ ...Accepted.fields, paymentUsed }).annotations({ identifier: "AcceptedPaidExecution" })
const ExecuteOutput = Schema.Union(PaidExecution, AcceptedPaidExecution)

/**
 * The receipt once the payment settled on chain; none while the settlement is still pending (the execution's
 * `settlement` says so and get_execution_status shows the transaction once it is mined), as HTTP omits PAYMENT-RESPONSE.
 */
const receiptMeta = (paywall: Paywall, payment: PaymentUse | null) =>
  payment?.channel !== undefined
    ? { [PAYMENT_RESPONSE_META]: channelSettleResponse({ network: payment.network, payer: payment.payer, ...payment.channel, receipt: payment.receipt }) }
    : payment === null || payment.settlementTxHash === null
    ? {}
    : { [PAYMENT_RESPONSE_META]: paywall.receipt(payment, { txHash: payment.settlementTxHash, payer: payment.payer, amount: payment.upto?.charged }, payment.receipt) }

export const paidTools = Effect.gen(function* () {
  const registration = yield* AgentRegistration
  const executions = yield* Executions
  const paywall = yield* Paywall
  const { publicBaseUrl } = yield* AppConfig
  return [
    defineTool({
      name: "register_agent",
      title: "Register an agent (paid: 0.10 USDC)",
      description:
        "Registers an AI agent: its owner wallet, name, priced capabilities (with input/output JSON Schemas) and execution endpoint; one agent per wallet. " +
        "Costs 0.10 USDC (the registration fee of POST /api/v1/agents), paid with x402 v2: called without payment it returns isError with the x402 PaymentRequired (structuredContent); " +
        "sign an exact USDC payment for one of its `accepts` and call again with the same arguments and the PaymentPayload in params._meta[\"x402/payment\"]. " +
        "The request is validated first: an invalid registration or a wallet that already has an agent is a tool error and nothing is charged. " +
        "Pay from the agent's own wallet; a payment from another wallet is refused (WALLET_NOT_CONTROLLED, nothing charged) unless the arguments carry `walletProof`, the agent wallet's EIP-712 signature over them (docs/clients.md). " +
        "Calling again with the very same payment and arguments answers the agent already registered. " +
        "The result is the active agent; its _meta[\"x402/payment-response\"] holds the settlement transaction.",
      input: RegisterAgentRequest,
      output: Registration,
      paid: true,
      run: (request, call) =>
        registration.register(request, call.args, presentedFromV2Payload(call.meta[PAYMENT_META]), `${publicBaseUrl}/mcp#register_agent`).pipe(
          Effect.map(({ payment, ...registered }) => new WithMeta(registered, { [PAYMENT_RESPONSE_META]: paywall.receipt(payment, payment) })),
          Effect.mapError(asX402Challenge(paywall))
        )
    }),
    defineTool({
      name: "execute",
      title: "Hire an agent (paid: its price + 0.001 USDC)",
      description:
        "Calls one capability of an agent with `input` (matching the capability's inputSchema; get_agent or the capability resource shows it). " +
        "Costs the capability's basePrice plus the 0.001 USDC platform fee (recommend_agent, discover_agents and the capability resource show the total), paid with x402 v2 exactly as POST /api/v1/execute: " +
        "called without payment it returns isError with the x402 PaymentRequired (structuredContent) for that amount; sign an exact USDC payment for one of its `accepts` and call again with the same arguments and the PaymentPayload in params._meta[\"x402/payment\"]. " +
        "The payment is held in escrow: if the agent fails or times out (tool error EXECUTION_FAILED or EXECUTION_TIMEOUT) it can be retried until retryUntil with POST /api/v1/execute/:requestId/retry, and is refunded on chain after that. " +
        "Waits for the output by default; `async: true` answers at once with the requestId to poll with get_execution_status. Keep `paymentUsed` from the result: it reads the output back. " +
        "The result's _meta[\"x402/payment-response\"] holds the settlement transaction once settled, and for a completed call the marketplace's signed receipt under extensions.receipt (docs/clients.md). An idempotencyKey (or x402's payment-identifier) makes a repeat the same purchase, charged once.",
      input: Schema.Struct({
        ...ExecuteRequest.fields,
        async: Schema.optional(Schema.Boolean.annotations({ description: "Answer at once with the requestId (status pending) instead of waiting for the output" }))
      }),
      output: ExecuteOutput,
      paid: true,
      run: ({ async, ...request }, call) =>
        executions.execute(request, { _tag: "X402", payment: presentedFromV2Payload(call.meta[PAYMENT_META]) }, { async: async === true }).pipe(
          Effect.mapError(asX402Challenge(paywall, { paymentIdentifier: true })),
          Effect.flatMap((outcome): Effect.Effect<WithMeta<typeof ExecuteOutput.Type>, ToolFailure> => {
            const handle = outcome.payment?.header ?? ""
            const meta = receiptMeta(paywall, outcome.payment)
            if (outcome._tag === "Accepted") {
              const { jobId, requestId, statusUrl } = outcome
              return Effect.succeed(new WithMeta({ ...(jobId === undefined ? {} : { jobId }), requestId, status: "pending" as const, statusUrl, paymentUsed: handle }, meta))
            }
            const view = outcome.view
            if (view.status === "failed" || view.status === "timeout") {
              const failed = view.status === "failed"
              return Effect.fail(new FailureWithMeta({
                code: failed ? "EXECUTION_FAILED" : "EXECUTION_TIMEOUT",
                message: `${failed ? "the agent failed" : "the agent did not answer in time"}; the payment is held for a retry until details.retryUntil (POST /api/v1/execute/:requestId/retry with PAYMENT-SIGNATURE: details.paymentUsed), then refunded`,
                details: { ...(failed ? { agentError: view.error ?? "failed" } : {}), ...view, paymentUsed: handle }
              }, meta))
            }
            return Effect.succeed(new WithMeta({ ...view, paymentUsed: handle }, meta))
          })
        )
    })
  ]
})
