// What pays for a call: the parameter of the one paid-call pipeline (services/executions/Executions.ts, admit → fund →
// reserve → run → record). A feature that funds calls (services/chains) builds one of these; the pipeline never imports
// that feature, and the feature never imports the pipeline's internals (docs/architecture.md, "One paid call").
import type { SqlError, Statement } from "@effect/sql"
import { Context, type Effect, type Either, type Option } from "effect"
import type { PresentedPayment } from "../../layers/x402/credential.js"
import type { AgentRecord } from "./Agent.js"
import type { BadRequest, BudgetExceeded, ChainTimeout, Conflict, Forbidden, NotFound } from "./Errors.js"
import type { ChainInfo as ChainInfoSchema } from "./Execution.js"

type ChainInfo = typeof ChainInfoSchema.Type

/** Why a funding source refuses a call before anything is reserved (the chain's rules, its budget, the callee's settings). */
export type FundingRefusal = BadRequest | BudgetExceeded | ChainTimeout | Forbidden | NotFound | Conflict

/** What the agent call carries for a call inside a chain: the token for its own sub-calls and the trace context. */
export interface CallContext {
  readonly chainToken?: string
  readonly traceparent?: string
}

/** A root execution as the chain that it starts sees it. */
export interface RootCall {
  readonly requestId: string
  readonly paymentId: string
  readonly payer: string
  readonly agentId: string
  readonly now: number
  /**
   * What backs the budget until its payment is money in hand: the settlement receivable (an `exact` payment, settled
   * before the root agent is called) unless said otherwise (a channel voucher: the channel's receivable).
   */
  readonly receivable?: string
}

/** A chain the paid call starts, planned before payment (services/chains/Root.ts builds it). */
export interface PlannedBudget {
  readonly chainId: string
  /** What the x402 payment must pay: the whole budget (the root's price is part of it). */
  readonly budget: bigint
  /** The chain's rows, in the root's one creation statement (budget booked, chain row, its machine, chain.started). */
  readonly statements: (root: RootCall) => Effect.Effect<ReadonlyArray<Statement.Statement<unknown>>>
  /** Once the budget settled: what the root agent's call carries. */
  readonly callContext: (root: RootCall) => Effect.Effect<CallContext>
  /** The chain section of the root's answer. */
  readonly info: (root: RootCall) => Effect.Effect<ChainInfo>
}

/** X-Chain-Budget: the x402 payment buys a chain's whole budget; it settles before the root agent is called. */
export interface BudgetPurchase {
  /** The budget asked for, or why the header cannot be read: part of the request's hash (a re-send must match it). */
  readonly requested: Either.Either<bigint, string>
  /** Every refusal before payment, once the agent and the root's price are known. */
  readonly plan: (agent: AgentRecord, price: bigint, async: boolean) => Effect.Effect<PlannedBudget, FundingRefusal>
}

/** An x402 payment (v1 or v2, from HTTP headers or MCP `_meta`) of exactly the price, or of a chain's whole budget. */
export interface X402Funding {
  readonly _tag: "X402"
  readonly payment: PresentedPayment
  readonly budget?: BudgetPurchase | undefined
}

/** A call made inside a chain (X-Chain-Token): its chain's budget pays, reserved under the chain's lock. */
export interface ChainBudgetFunding {
  readonly _tag: "ChainBudget"
  readonly chainId: string
  readonly depth: number
  readonly parentExecutionId: string
  /** The chain's payer: its rate-limit windows and idempotency keys are this call's. */
  readonly payer: string
  /** When the call arrived: the chain's clock for its checks and the execution's timestamps. */
  readonly now: number
  /** The callee's and the budget's refusals once the agent and the price are known (nothing is reserved yet). */
  readonly admit: (agent: AgentRecord, price: bigint) => Effect.Effect<void, FundingRefusal>
  /**
   * Inside the reservation's transaction: takes the price from the budget (or fails with the reason, reserving nothing).
   * `statements`: the chain's rows that go with it (its outbox events); `callContext`: what the callee's call carries
   * (a token one level deeper naming the budget left, its own span in the chain's trace).
   */
  readonly reserve: (call: {
    readonly requestId: string
    readonly transactionId: string
    readonly agentId: string
    readonly price: bigint
  }) => Effect.Effect<{
    readonly statements: ReadonlyArray<Statement.Statement<unknown>>
    readonly callContext: Effect.Effect<CallContext>
  }, FundingRefusal | SqlError.SqlError>
  /** The chain section of the answer (`readHandle` only in the answer that made the call). */
  readonly info: (readHandle: Option.Option<string>) => Effect.Effect<ChainInfo>
}

/**
 * A call paid from the payer's credit at the marketplace (`X-Credit-Payment`: the payer wallet's EIP-712
 * `PayerCreditSpend` over this call, services/remainders/CreditSpends.ts). No settlement: the money is in the treasury.
 */
export interface CreditFunding {
  readonly _tag: "Credit"
  /** The header as sent (base64 JSON); read and verified by the pipeline's fund step. */
  readonly header: string
}

// A metered maximum is not a kind of its own: an x402 or credit funding of the capability's maximum (services/executions/metering.ts).
export type Funding = X402Funding | ChainBudgetFunding | CreditFunding

/**
 * A failed sub-call's reservation going back to its chain's budget, from the execution's step (services/chains owns the
 * chain row and provides this; the execution moves its own escrow). None: the chain already ended.
 */
export class ChainBudgetReturns extends Context.Tag("domain/ChainBudgetReturns")<ChainBudgetReturns, {
  readonly giveBack: (chainId: string, amount: bigint) => Effect.Effect<Option.Option<{ readonly rootAgentId: string; readonly remaining: bigint }>, SqlError.SqlError>
}>() {}
