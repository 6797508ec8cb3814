// Paid agent registration, in the order of its checks: a re-send of a registration already paid with the very same
// header answers the agent it made; otherwise the body, the agent wallet's proof (when another wallet pays), the one
// agent per wallet, the payment; only then the pending agent and the reservation, and settlement.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { Chain } from "../../layers/Chain.js"
import type { PresentedPayment } from "../../layers/x402/credential.js"
import { PaymentRejected } from "../../layers/x402/payment.js"
import { Capability, type RegisterAgentRequest } from "../../src/domain/Agent.js"
import { Conflict, Forbidden, PaymentRequired, Unavailable } from "../../src/domain/Errors.js"
import { type AgentId, newAgentId } from "../../src/domain/Ids.js"
import { REGISTRATION_FEE } from "../../src/domain/Money.js"
import { Payments } from "../payments/Payments.js"
import { type Quote, Paywall } from "../payments/Paywall.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import { Agents } from "./Agents.js"
import { registrationFingerprint, verifyRegistrationProof } from "./registrationProof.js"

export interface RegistrationResult {
  readonly id: AgentId
  readonly wallet: string
  readonly name: string
  readonly status: "active"
  readonly registrationTxId: string
  /** The receipt, in the terms of the payer's x402 version (`network`: v1 name or CAIP-2). */
  readonly payment: { readonly version: 1 | 2; readonly txHash: string; readonly payer: string; readonly network: string }
}

const encodeCapabilities = Schema.encodeSync(Schema.Array(Capability))

const isAlreadyUsed = (error: unknown): error is PaymentRequired =>
  error instanceof PaymentRequired && error.details["reason"] === "payment_already_used"

export class AgentRegistration extends Effect.Service<AgentRegistration>()("agents/AgentRegistration", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const agents = yield* Agents
    const paywall = yield* Paywall
    const payments = yield* Payments

    /**
     * The agent this very payment header already registered, when the body is the one it paid for (its fingerprint):
     * the client lost the answer and sends the request again. Holding the exact header is the proof (it is a bearer
     * credential), so it is not verified again and nothing is charged. Anything else (another body, a header that paid
     * for an execution) is none: the ordinary path refuses it as a used payment.
     */
    const resent = (presented: PresentedPayment, fingerprint: string, quote: Quote) =>
      Effect.gen(function* () {
        if (presented === undefined || presented instanceof PaymentRejected) return Option.none<RegistrationResult>()
        const prior = yield* payments.madeWith(presented)
        if (Option.isNone(prior) || prior.value.purpose !== "registration") return Option.none<RegistrationResult>()
        const payment = prior.value
        const [agent] = yield* sql<{ id: AgentId; wallet: string; name: string; status: string; registrationTxHash: string | null; registrationRequestSha256: string | null }>`
          SELECT id, wallet, name, status, registration_tx_hash, registration_request_sha256 FROM agents WHERE id = ${payment.subjectId}`.pipe(Effect.orDie)
        if (agent === undefined) {
          if (payment.status !== "failed") return Option.none<RegistrationResult>()
          // The fee never settled and its pending agent was removed: the answer the first request got.
          return yield* paywall.price(quote).refuse(new PaymentRejected({
            reason: "settlement_failed",
            message: `this payment's settlement failed (${payment.failureReason ?? "unknown"}); no agent was registered with it`
          }))
        }
        if (agent.registrationRequestSha256 !== fingerprint) return Option.none<RegistrationResult>()
        if (agent.status === "pending") {
          return yield* new Unavailable({
            code: "SERVICE_UNAVAILABLE",
            message: "the chain has not confirmed the registration fee yet; the agent is activated as soon as it settles",
            details: { agentId: agent.id, paymentId: payment.id }
          })
        }
        const txHash = agent.registrationTxHash ?? payment.txHash ?? ""
        return Option.some({
          id: agent.id,
          wallet: agent.wallet,
          name: agent.name,
          status: "active",
          registrationTxId: txHash,
          payment: { version: presented.version, txHash, payer: payment.payer, network: presented.version === 2 ? paywall.caip2 : paywall.network }
        } satisfies RegistrationResult)
      })

    /** A new registration: every check runs before the payment is looked at, so a bad request is never charged. */
    const fresh = (req: RegisterAgentRequest, rawBody: unknown, fingerprint: string, presented: PresentedPayment, quote: Quote) =>
      Effect.gen(function* () {
        yield* agents.validateSemantics(req)
        if (req.walletProof !== undefined) yield* verifyRegistrationProof(rawBody, req, req.walletProof, chain.chainId)
        yield* agents.walletTaken(req.wallet)
        const { payment: verified, presentation, priced } = yield* paywall.charge(quote, presented)
        // One wallet serves for authentication and payment: paying from it proves control; another payer needs its proof.
        if (verified.payer !== req.wallet.toLowerCase() && req.walletProof === undefined) {
          return yield* new Forbidden({
            code: "WALLET_NOT_CONTROLLED",
            message: "the fee was paid by another wallet than the agent's: pay from the agent's wallet, or add a walletProof signed by it (docs/clients.md). Nothing was charged",
            details: { wallet: req.wallet, payer: verified.payer }
          })
        }
        // The payment is verified, not settled: the endpoints' hosts are looked up only now, and a refused one charges nothing.
        yield* agents.checkEndpointHosts(req.endpoints)
        const refuse = priced.refuse
        const agentId = newAgentId()
        // The pending agent row and the payment reservation commit together, before settlement.
        const paymentId = yield* sql.withTransaction(
          Effect.gen(function* () {
            const paymentId = yield* payments.reserve(verified, "registration", agentId)
            yield* sql`INSERT INTO agents ${sql.insert({
              id: agentId,
              wallet: req.wallet,
              name: req.name,
              description: req.description ?? null,
              tags: JSON.stringify([...new Set(req.tags ?? [])]),
              capabilities: JSON.stringify(encodeCapabilities(req.capabilities)),
              endpoints: JSON.stringify(req.endpoints),
              metadata: req.metadata === undefined ? null : JSON.stringify(req.metadata),
              status: "pending",
              registrationPaymentId: paymentId,
              registrationRequestSha256: fingerprint
            })}`
            return paymentId
          })
        ).pipe(
          Effect.catchTag("SqlError", (error) =>
            isUniqueViolation(error, "agents_wallet_key")
              ? Effect.fail(new Conflict({ code: "WALLET_ALREADY_REGISTERED", message: "this wallet already has an agent; nothing was charged", details: { wallet: req.wallet } }))
              : Effect.die(error)),
          Effect.catchTag("PaymentRejected", (rejection) => Effect.fail(refuse(rejection)))
        )
        const outcome = yield* payments.settle(paymentId, verified, priced.accepts[0]!).pipe(Effect.orDie)
        switch (outcome._tag) {
          case "Failed":
            return yield* refuse(new PaymentRejected({ reason: outcome.reason === "rpc_error" ? "settlement_failed" : outcome.reason, message: `settlement failed: ${outcome.message}` }))
          case "Pending":
            return yield* new Unavailable({
              code: "SERVICE_UNAVAILABLE",
              message: "the chain has not confirmed the registration fee yet; the agent is activated as soon as it settles",
              details: { agentId, paymentId }
            })
          case "Settled":
            return {
              id: agentId,
              wallet: req.wallet,
              name: req.name,
              status: "active",
              registrationTxId: outcome.txHash,
              payment: { version: presentation.version, txHash: outcome.txHash, payer: verified.payer, network: presentation.network }
            } satisfies RegistrationResult
        }
      })

    /**
     * `rawBody`: the registration as the client sent it (the parsed JSON body, or the MCP tool's arguments), which the
     * wallet proof signs and the re-send fingerprint hashes. A request that loses the race to its own twin (the same
     * header sent twice at once) is answered like a re-send once the twin's payment is recorded.
     */
    const register = (req: RegisterAgentRequest, rawBody: unknown, presented: PresentedPayment, resource: string) =>
      Effect.gen(function* () {
        const quote: Quote = { amount: REGISTRATION_FEE, resource, description: "Agent registration fee (0.10 USDC)" }
        const fingerprint = registrationFingerprint(rawBody)
        const again = yield* resent(presented, fingerprint, quote)
        if (Option.isSome(again)) return again.value
        return yield* fresh(req, rawBody, fingerprint, presented, quote).pipe(
          Effect.catchIf(isAlreadyUsed, (used) =>
            Effect.flatMap(resent(presented, fingerprint, quote), Option.match({ onNone: () => Effect.fail(used), onSome: Effect.succeed }))))
      }).pipe(Effect.withSpan("AgentRegistration.register"))

    return { register } as const
  }),
  dependencies: [Agents.Default, Paywall.Default, Payments.Default]
}) {}
