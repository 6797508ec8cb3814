// The root of a chain: a paid POST /execute with X-Chain-Budget, whose x402 payment buys the whole budget
// (src/domain/Funding.ts, BudgetPurchase). Checked before payment; its payment books the root's price into escrow and the
// rest into chain_budgets; the pipeline settles it before the root agent is called (a budget is spent only once it is
// treasury money) and tells the chain (FUNDED, CHECK); the root agent gets X-Chain-Token for its sub-calls.
import { SqlClient } from "@effect/sql"
import { Effect, Either, Option } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { currentTraceId } from "../../layers/outbound/trace.js"
import { CHAIN_TIMEOUT_MS, chainMachine } from "../../machines/chain.js"
import { historyStatement, scheduleStatement } from "../../machines/runner.js"
import { actionsOf, startMachine } from "../../machines/step.js"
import type { AgentRecord } from "../../src/domain/Agent.js"
import type { BudgetPurchase, CallContext, PlannedBudget, RootCall } from "../../src/domain/Funding.js"
import { BadRequest, BudgetExceeded, Forbidden } from "../../src/domain/Errors.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { parseChainBudget } from "./budget.js"
import { ChainsRepo } from "./Repo.js"
import { ChainTokens } from "./Tokens.js"
import { MAX_CHAIN_DEPTH } from "./token.js"

/** A chain about to start: decided before payment, created with the root's reservation. */
export interface RootPlan {
  readonly chainId: string
  readonly budget: bigint
  readonly price: bigint
  readonly maxDepth: number
  readonly traceId: string
  /** The root execution's span: its forwarded traceparent and the parent span of its sub-calls. */
  readonly spanId: string
}

/** What a chained response carries (spec section 2, Execution result `chain`). */
export interface ChainInfo {
  readonly chainId: string
  readonly depth: number
  readonly remainingBudget: string
  readonly childToken: string
  readonly status?: string
  readonly refunded?: string
}

export const newSpanId = () => randomBytes(8).toString("hex")

export class ChainRoots extends Effect.Service<ChainRoots>()("chains/ChainRoots", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const tokens = yield* ChainTokens
    const repo = yield* ChainsRepo
    const ledger = yield* Ledger
    const outbox = yield* Outbox

    /** The chain a request would start (none without X-Chain-Budget); every refusal before anything is paid. */
    const admit = (header: string | undefined, agent: AgentRecord, price: bigint, async: boolean) =>
      Effect.gen(function* () {
        const budget = yield* Either.match(parseChainBudget(header), {
          onLeft: (message) => Effect.fail(new BadRequest({ code: "VALIDATION_ERROR", message, details: { issues: [{ path: "X-Chain-Budget", message }] } })),
          onRight: Effect.succeed
        })
        if (Option.isNone(budget)) return Option.none<RootPlan>()
        if (async) {
          const message = "a chain's root call is answered synchronously (no async=true, callbackUrl or webhookUrl)"
          return yield* new BadRequest({ code: "VALIDATION_ERROR", message, details: { issues: [{ path: "X-Chain-Budget", message }] } })
        }
        if (!agent.chainSettings.chain_enabled) {
          return yield* new Forbidden({
            code: "CHAIN_DISABLED",
            message: "the target agent has chaining disabled: it cannot spend a chain budget; call it without X-Chain-Budget",
            details: { agentId: agent.id }
          })
        }
        if (budget.value < price) {
          return yield* new BudgetExceeded({
            code: "BUDGET_EXCEEDED",
            message: "the chain budget does not cover the root call itself; nothing was charged",
            details: { estimated: formatUsdc(price), remaining: formatUsdc(budget.value), shortfall: formatUsdc(price - budget.value) }
          })
        }
        return Option.some<RootPlan>({
          chainId: randomUUID(),
          budget: budget.value,
          price,
          maxDepth: Math.min(MAX_CHAIN_DEPTH, Math.max(1, agent.chainSettings.chain_max_depth)),
          traceId: yield* currentTraceId,
          spanId: newSpanId()
        })
      })

    /** The chain's rows, for the root's creation statement: budget booked, chain row, its machine and timer, chain.started. */
    const statements = (plan: RootPlan, root: RootCall) =>
      Effect.gen(function* () {
        const start = startMachine(chainMachine, { deadline: root.now + CHAIN_TIMEOUT_MS })
        const rest = plan.budget - plan.price
        const hold = rest === 0n ? [] : (yield* ledger.transferStatements({
          kind: "chain_budget_hold",
          movements: [{ debit: root.receivable ?? Accounts.settlementReceivable, credit: Accounts.chainBudgets, amount: rest }],
          paymentId: root.paymentId,
          agentId: root.agentId,
          subjectId: plan.chainId
        }).pipe(Effect.orDie)).statements
        return [
          sql`INSERT INTO chains ${sql.insert({
            id: plan.chainId,
            rootExecutionId: root.requestId,
            rootAgentId: root.agentId,
            paymentId: root.paymentId,
            payer: root.payer,
            totalBudget: plan.budget.toString(),
            remaining: rest.toString(),
            maxDepth: plan.maxDepth,
            status: start.state,
            machineSnapshot: JSON.stringify(start.persisted),
            traceId: plan.traceId,
            startedAt: new Date(root.now),
            updatedAt: new Date(root.now)
          })}`,
          ...hold,
          ...actionsOf(start, "scheduleTimeout").map(({ at }) => scheduleStatement(sql, "chain", plan.chainId, { type: "TIMEOUT", at })),
          historyStatement(sql, [{ machine: "chain", actorId: plan.chainId, event: { type: "STARTED" }, from: null, to: start.state, at: root.now }]),
          outbox.emitStatement("chain.started", root.agentId, {
            chainId: plan.chainId,
            rootRequestId: root.requestId,
            agentId: root.agentId,
            totalBudget: formatUsdc(plan.budget),
            remainingBudget: formatUsdc(rest),
            maxDepth: plan.maxDepth
          })
        ]
      })

    /** A token for the root agent's sub-calls (depth 1), fresh for 30 seconds, naming the budget left now. */
    const rootToken = (plan: RootPlan, root: { readonly requestId: string; readonly agentId: string; readonly payer: string; readonly startedAt: Date }) =>
      Effect.gen(function* () {
        const chain = Option.getOrThrow(yield* repo.find(plan.chainId).pipe(Effect.orDie))
        const remaining = chain.remaining
        const token = yield* tokens.issue({
          cid: plan.chainId,
          d: 1,
          md: plan.maxDepth,
          rb: formatUsdc(remaining),
          tb: formatUsdc(plan.budget),
          pa: root.agentId,
          rw: root.payer,
          sa: root.startedAt.toISOString(),
          cc: [root.agentId],
          pe: root.requestId,
          tid: plan.traceId,
          sid: plan.spanId
        })
        const info: ChainInfo = {
          chainId: plan.chainId,
          depth: 0,
          remainingBudget: formatUsdc(remaining),
          childToken: token,
          status: chain.status,
          ...(chain.refundAmount === null ? {} : { refunded: formatUsdc(chain.refundAmount) })
        }
        return { token, info }
      })

    /**
     * X-Chain-Budget as the x402 funding's budget purchase: parsed at once (a re-send must match it), every refusal once
     * the pipeline knows the agent and the root's price, then the chain's part of the root's creation, call and answer.
     */
    const purchase = (header: string): BudgetPurchase => ({
      requested: Either.map(parseChainBudget(header), Option.getOrThrow),
      plan: (agent, price, async) =>
        Effect.map(admit(header, agent, price, async), (planned) => {
          const plan = Option.getOrThrow(planned)
          const started = (root: RootCall) => ({ requestId: root.requestId, agentId: root.agentId, payer: root.payer, startedAt: new Date(root.now) })
          return {
            chainId: plan.chainId,
            budget: plan.budget,
            statements: (root) => statements(plan, root),
            callContext: (root) =>
              Effect.map(rootToken(plan, started(root)), ({ token }): CallContext => ({ chainToken: token, traceparent: `00-${plan.traceId}-${plan.spanId}-01` })),
            info: (root) => Effect.map(rootToken(plan, started(root)), ({ info }) => info)
          } satisfies PlannedBudget
        })
    })

    return { purchase } as const
  }),
  dependencies: [ChainTokens.Default, ChainsRepo.Default, Ledger.Default, Outbox.Default]
}) {}
