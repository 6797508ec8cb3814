// /api/v1/payments: where an agent's money is, and what one transaction did with the money.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ConflictResponse, ForbiddenResponse, UnauthorizedResponse } from "../domain/Errors.js"
import { AgentId, TransactionId } from "../domain/Ids.js"
import { PageQuery, WithdrawAccepted, WithdrawalList, Withdrawal, WithdrawRequest } from "../domain/Withdrawal.js"
import { WalletSignatureHeaders } from "./AgentsApi.js"
import { ok } from "./Envelope.js"

export const Balance = Schema.Struct({
  agentId: Schema.String,
  available: Schema.String,
  pending: Schema.String,
  totalEarned: Schema.String,
  totalWithdrawn: Schema.String,
  totalDisputed: Schema.String,
  executionCount: Schema.Number,
  escrow: Schema.Struct({ pendingCount: Schema.Number, pendingTotal: Schema.String })
}).annotations({ identifier: "Balance" })

export const Transaction = Schema.Struct({
  id: Schema.String,
  request_id: Schema.String,
  requesting_agent: Schema.NullOr(Schema.String).annotations({ description: "The agent that hired the provider inside a chain; null when a client paid" }),
  payer: Schema.String,
  providing_agent: Schema.String,
  capability_id: Schema.String,
  amount: Schema.String,
  gross_amount: Schema.String,
  platform_fee: Schema.String,
  agent_fee: Schema.String,
  platformCut: Schema.String,
  platform_revenue: Schema.String,
  agent_earnings: Schema.String,
  status: Schema.String,
  execution_time: Schema.NullOr(Schema.Number),
  escrow_id: Schema.String,
  escrow_status: Schema.String,
  escrow_release_at: Schema.NullOr(Schema.String),
  settlement: Schema.Struct({
    status: Schema.String,
    txHash: Schema.NullOr(Schema.String),
    network: Schema.String.annotations({ description: "The network the payment was made on (\"base\", \"ethereum\"): its settlement and refund are there" })
  }),
  refund_tx_hash: Schema.NullOr(Schema.String),
  /** Only for a call paid from the payer's credit (no settlement transaction). */
  funding: Schema.optional(Schema.Literal("credit")),
  dispute_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  completed_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Transaction" })

/** The list view of a Transaction (spec section 2: no single-view-only fields). */
export const TransactionListItem = Schema.Struct({
  id: Schema.String,
  requesting_agent: Schema.NullOr(Schema.String).annotations({ description: "The agent that hired the provider inside a chain; null when a client paid" }),
  providing_agent: Schema.String,
  capability_id: Schema.String,
  amount: Schema.String,
  platformCut: Schema.String,
  agent_earnings: Schema.String,
  status: Schema.String,
  execution_time: Schema.NullOr(Schema.Number),
  escrow_id: Schema.String,
  /** The network its payment was made on. */
  network: Schema.String,
  created_at: Schema.String
}).annotations({ identifier: "TransactionListItem" })

export class PaymentsApi extends HttpApiGroup.make("payments")
  .add(
    HttpApiEndpoint.get("balance", "/balance/:agentId")
      .setPath(Schema.Struct({ agentId: AgentId }))
      .addSuccess(ok(Balance))
      .annotate(OpenApi.Summary, "An agent's balance: available, pending in escrow, totals")
  )
  .add(
    HttpApiEndpoint.post("withdraw", "/withdraw")
      .setPayload(WithdrawRequest)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(WithdrawAccepted), { status: 202 })
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Withdraw available earnings (minimum 1.00, fee 0.10): to the registered wallet with the wallet signature, elsewhere with an EIP-712 authorization")
      .annotate(
        OpenApi.Description,
        "Without `destinationWallet` (or with the registered wallet) the spec's X-Agent-Wallet / X-Agent-Signature headers authorise the payout. Any other destination needs `authorization`: the EIP-712 typed data `Withdrawal{agentId string, amount uint256 (micro-USDC), destination address, nonce bytes32, deadline uint256 (Unix seconds, at most 330 s ahead)}` in the domain `{name: \"Agent Marketplace\", version: \"1\", chainId, verifyingContract: the treasury}`, signed by the registered wallet; each nonce pays once. Without it: 403 WITHDRAWAL_AUTHORIZATION_REQUIRED with `details.typedData`. See docs/withdrawals.md."
      )
  )
  .add(
    HttpApiEndpoint.get("withdrawals", "/withdrawals/:agentId")
      .setPath(Schema.Struct({ agentId: AgentId }))
      .setUrlParams(PageQuery)
      .addSuccess(ok(WithdrawalList))
      .annotate(OpenApi.Summary, "An agent's withdrawals, newest first, with totals")
  )
  .add(
    HttpApiEndpoint.get("withdrawal", "/withdrawal/:id")
      .setPath(Schema.Struct({ id: Schema.String.pipe(Schema.pattern(/^wd_[A-Za-z0-9_-]{1,64}$/)) }))
      .addSuccess(ok(Withdrawal))
      .annotate(OpenApi.Summary, "One withdrawal")
  )
  .add(
    HttpApiEndpoint.get("history", "/history/:agentId")
      .setPath(Schema.Struct({ agentId: AgentId }))
      .setUrlParams(PageQuery)
      .setHeaders(WalletSignatureHeaders)
      .addSuccess(ok(Schema.Array(TransactionListItem)))
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .annotate(OpenApi.Summary, "The agent's transactions, newest first (wallet signature)")
  )
  .add(
    HttpApiEndpoint.get("transaction", "/tx/:txId")
      .setPath(Schema.Struct({ txId: TransactionId }))
      .addSuccess(ok(Transaction))
      .annotate(OpenApi.Summary, "One transaction: amounts, split, escrow and settlement")
  )
  .prefix("/api/v1/payments") {}

export class PlatformApi extends HttpApiGroup.make("platform")
  .add(
    HttpApiEndpoint.get("signingKey", "/signing-key")
      .addSuccess(ok(Schema.Struct({ keyId: Schema.String, algorithm: Schema.Literal("Ed25519"), publicKeyPem: Schema.String })))
      .annotate(OpenApi.Summary, "The public key agents verify our forwarded requests with (see docs/agent-requests.md)")
  )
  .prefix("/api/v1/platform") {}
