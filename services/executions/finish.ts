// The run and record steps of an x402-funded call: settle on chain and call the agent at the same time, then record both
// in one transaction whose writes go as one batch (services/sql/UnitOfWork.ts); the machine releases the output only once
// both are in. A payment that buys a chain's budget settles first, then the agent is called (settleFirst). A crash in
// between is finished by the recovery workers and the deadline timers.
import { SqlClient } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Clock, Config, Effect, Option } from "effect"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import type { PaymentRequirements } from "../../layers/x402/requirements.js"
import { erc6492DeploymentOf } from "../../layers/x402/smartAccount.js"
import { MachineHost } from "../../machines/Host.js"
import type { AgentRecord, Capability } from "../../src/domain/Agent.js"
import type { PlannedBudget, RootCall } from "../../src/domain/Funding.js"
import { isMetered } from "../../src/domain/Pricing.js"
import { Circuits } from "../circuits/Circuits.js"
import { Payments, type Settlement } from "../payments/Payments.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { AgentCall, type CallOutcome } from "./AgentCall.js"
import { both } from "./both.js"
import { Metering } from "./metering.js"
import { steppedExecution } from "./executionSpec.js"
import type { ExecutionRow } from "./Repo.js"

export interface PaidCall {
  readonly requestId: string
  readonly paymentId: string
  readonly payment: VerifiedPayment
  readonly requirements: PaymentRequirements
  readonly agent: AgentRecord
  readonly capability: Capability
  readonly input: unknown
}

/**
 * The execution as the transaction left it when that transaction settled its payment (the row the machine stepped,
 * with the settlement's hash): what a reload would read. None otherwise (a failure or a pending settlement is rare and
 * reloaded, so that the payment's own state is read rather than guessed).
 */
const settledRow = (row: Option.Option<ExecutionRow>, settlement: Settlement): Option.Option<ExecutionRow> =>
  Option.flatMap(row, (r) => {
    if (r.settlementState !== "settled") return Option.none()
    if (r.settlementTxHash !== null) return Option.some(r)
    return settlement.outcome._tag === "Settled" ? Option.some({ ...r, settlementTxHash: settlement.outcome.txHash }) : Option.none()
  })

/** A payment whose signature carries an ERC-6492 deployment: its account is deployed before its transfer settles. */
const deploysFirst = (p: VerifiedPayment) => p.signature.length > 132 && erc6492DeploymentOf(p.signature) !== undefined

/** The outcome of a call whose payment did not settle: the agent was not called (the machine voids or refunds it). */
const notCalled = (settlement: Settlement): Effect.Effect<CallOutcome> =>
  Effect.map(Clock.currentTimeMillis, (at): CallOutcome => ({
    success: false,
    event: {
      type: "AGENT_FAILED",
      at,
      timedOut: false,
      kind: "payment",
      error: settlement.outcome._tag === "Failed"
        ? `the payment failed (${settlement.outcome.reason}); the agent was not called`
        : "the payment is not settled yet; the agent was not called and the payment is refunded once it settles"
    }
  }))

export const finish = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const host = yield* MachineHost
  const payments = yield* Payments
  const agentCall = yield* AgentCall
  const circuits = yield* Circuits
  const metering = yield* Metering
  // The record step as one statement without BEGIN/COMMIT when nothing changed the rows since they were read
  // (UnitOfWork.optimistic; the locking transaction otherwise). A metered call reads its meter: always the locking path.
  const optimistic = yield* Config.boolean("DATABASE_OPTIMISTIC_RECORD").pipe(Config.withDefault(true), Effect.orDie)
  return (call: PaidCall) =>
    Effect.gen(function* () {
      const settle = payments.settleOnChain(call.paymentId, call.payment, call.requirements)
      const callAgent: Effect.Effect<CallOutcome> = agentCall.call({ id: call.requestId, input: call.input }, call.agent, call.capability)
      // A counterfactual account's payment settles first (its deployment, then its transfer): the agent is called only
      // on money that arrived, so a payment that cannot settle never buys a call (docs/settlement.md).
      const first = deploysFirst(call.payment)
      const [settlement, outcome] = first
        ? yield* Effect.flatMap(settle, (s): Effect.Effect<readonly [Settlement, CallOutcome]> =>
          Effect.map(s.outcome._tag === "Settled" ? callAgent : notCalled(s), (o) => [s, o] as const))
        : yield* both(settle, callAgent)
      const called = !first || settlement.outcome._tag === "Settled"
      const metered = isMetered(call.capability.pricing)
      const after = yield* (optimistic && !metered ? UnitOfWork.optimistic(sql) : UnitOfWork.transaction(sql))(
        Effect.gen(function* () {
          // A metered call's charge for what it used, before the machine releases anything (metering.ts). A flat-priced
          // call was reserved without meter columns (meteredColumns), so there is nothing to read and charge.
          if (metered) yield* metering.charge(call.requestId, outcome, settlement.outcome._tag === "Settled")
          yield* host.deliver("execution", call.requestId, outcome.event)
          yield* payments.recordIn(call.paymentId, settlement)
          return yield* steppedExecution(call.requestId)
        })
      )
      if (called) yield* circuits.observe(call.agent.id, call.agent.circuitState, outcome.success)
      return settledRow(after, settlement)
    })
})

/**
 * A chain's root: its whole budget settles, then the root agent is called with its chain token (never on money that did
 * not arrive: a payment that failed or is still unsettled fails the call without calling the agent; its machine refunds
 * or voids it). The chain hears FUNDED with the settlement and CHECK once the root answered, as machine events.
 */
export const settleFirst = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const host = yield* MachineHost
  const payments = yield* Payments
  const agentCall = yield* AgentCall
  const circuits = yield* Circuits
  return (plan: PlannedBudget, call: PaidCall, root: RootCall) =>
    Effect.gen(function* () {
      const settlement = yield* payments.settleOnChain(call.paymentId, call.payment, call.requirements)
      const outcome = settlement.outcome
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* payments.recordIn(call.paymentId, settlement)
          if (outcome._tag === "Settled") yield* host.deliver("chain", plan.chainId, { type: "FUNDED", at: yield* Clock.currentTimeMillis })
        })
      )
      if (outcome._tag !== "Settled") {
        const error = outcome._tag === "Failed"
          ? `the chain's payment failed (${outcome.reason}); the agent was not called`
          : "the chain's payment is not settled yet; the agent was not called and the payment is refunded once it settles"
        yield* host.deliverNow("execution", call.requestId, { type: "AGENT_FAILED", at: yield* Clock.currentTimeMillis, timedOut: false, error, kind: "payment" })
      } else {
        const called = yield* agentCall.call({ id: call.requestId, input: call.input }, call.agent, call.capability, yield* plan.callContext(root))
        yield* host.deliverNow("execution", call.requestId, called.event)
        yield* circuits.observe(call.agent.id, call.agent.circuitState, called.success)
      }
      yield* host.deliverNow("chain", plan.chainId, { type: "CHECK", at: yield* Clock.currentTimeMillis })
    }).pipe(withSpan("Executions.settleFirst"))
})
