// A sub-call inside a chain: POST /execute with X-Chain-Token and no payment. The chain is the call's funding
// (src/domain/Funding.ts, ChainBudget): every refusal the chain decides (token, chain, depth, cycle, the callee's settings
// and standing, the budget) comes before anything is reserved; the price is reserved from the budget (one UPDATE under the
// chain row's lock) in the executions pipeline's reservation transaction.
import { Clock, Effect, Option } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import { CHAIN_TIMEOUT_MS } from "../../machines/chain.js"
import type { AgentRecord } from "../../src/domain/Agent.js"
import { BadRequest, BudgetExceeded, ChainTimeout, Forbidden, NotFound } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import type { CallContext, ChainBudgetFunding } from "../../src/domain/Funding.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Outbox } from "../outbox/Outbox.js"
import { type ChainRow, ChainsRepo, type Reserved } from "./Repo.js"
import { newSpanId } from "./Root.js"
import { cycleOf } from "./token.js"
import type { ChainTokenPayload } from "./token.js"
import { ChainTokens } from "./Tokens.js"

/** Spec: a chained callee needs a reputation of at least 40. */
export const MIN_CHAIN_REPUTATION = 40

const ended = (chain: ChainRow) => chain.status === "completed" || chain.status === "failed" || chain.status === "partial"

export class ChainCalls extends Effect.Service<ChainCalls>()("chains/ChainCalls", {
  effect: Effect.gen(function* () {
    const tokens = yield* ChainTokens
    const repo = yield* ChainsRepo
    const outbox = yield* Outbox

    /** Why a chain cannot pay `price` now (none: it can, as far as a read can tell; the reservation decides). */
    const gate = (chain: Option.Option<ChainRow>, chainId: string, price: bigint, now: number) =>
      Effect.gen(function* () {
        if (Option.isNone(chain) || ended(chain.value) || chain.value.status === "pending") {
          return yield* new NotFound({
            code: "CHAIN_NOT_FOUND",
            message: Option.isNone(chain) ? `no chain ${chainId}` : chain.value.status === "pending" ? "the chain's payment has not settled" : `the chain has ended (${chain.value.status})`,
            details: { chainId, ...Option.match(chain, { onNone: () => ({}), onSome: (c) => ({ status: c.status }) }) }
          })
        }
        const c = chain.value
        if (now - c.startedAt.getTime() >= CHAIN_TIMEOUT_MS) {
          return yield* new ChainTimeout({
            code: "CHAIN_TIMEOUT",
            message: "the chain is older than its 5-minute limit",
            details: { chainId, startedAt: c.startedAt.toISOString(), limitSeconds: CHAIN_TIMEOUT_MS / 1000 }
          })
        }
        if (c.remaining < price) {
          return yield* new BudgetExceeded({
            code: "BUDGET_EXCEEDED",
            message: "the call costs more than the chain's remaining budget; nothing was reserved",
            details: { estimated: formatUsdc(price), remaining: formatUsdc(c.remaining), shortfall: formatUsdc(price - c.remaining) }
          })
        }
      })

    /** The reservation found the chain unable to pay: the reason, read again (a concurrent call may have taken the budget). */
    const refused = (chainId: string, price: bigint, now: number) =>
      Effect.flatMap(repo.find(chainId).pipe(Effect.orDie), (chain) =>
        Effect.zipRight(
          gate(chain, chainId, price, now),
          Effect.fail(new BudgetExceeded({ code: "BUDGET_EXCEEDED", message: "the chain could not reserve the call's price; nothing was reserved", details: { estimated: formatUsdc(price) } }))
        ))

    /** The callee's own rules: chaining on, the caller not blocked (and allowed, when it keeps a list), standing ≥ 40. */
    const calleeAccepts = (agent: AgentRecord, caller: string) =>
      Effect.gen(function* () {
        const settings = agent.chainSettings
        const refuse = (reason: string, message: string) =>
          Effect.fail(new Forbidden({ code: "CHAIN_DISABLED", message, details: { agentId: agent.id, callerAgentId: caller, reason } }))
        if (!settings.chain_enabled) return yield* refuse("chaining_disabled", "the target agent has chaining disabled")
        if (settings.chain_blocked_callers.includes(caller)) return yield* refuse("caller_blocked", "the target agent does not accept chained calls from this agent")
        if (settings.chain_allowed_callers.length > 0 && !settings.chain_allowed_callers.includes(caller)) {
          return yield* refuse("caller_not_allowed", "the target agent accepts chained calls only from the agents on its allow-list")
        }
        if (agent.reputationScore < MIN_CHAIN_REPUTATION) {
          return yield* new Forbidden({
            code: "AGENT_NOT_CHAINABLE",
            message: `the target agent's reputation is below ${MIN_CHAIN_REPUTATION}`,
            details: { agentId: agent.id, reputation: agent.reputationScore, minimum: MIN_CHAIN_REPUTATION }
          })
        }
      })

    /** The chain section of a response: this call's depth, the budget left now, a fresh token for the caller's next call. */
    const infoFor = (token: ChainTokenPayload) =>
      Effect.gen(function* () {
        const chain = yield* repo.find(token.cid).pipe(Effect.orDie)
        const remaining = Option.match(chain, { onNone: () => 0n, onSome: (c) => c.remaining })
        const { exp: _, ...rest } = token
        const childToken = yield* tokens.issue({ ...rest, rb: formatUsdc(remaining) })
        return { chainId: token.cid, depth: token.d, remainingBudget: formatUsdc(remaining), childToken }
      })

    /**
     * A call inside a chain, funded by its budget: every refusal the chain itself decides (token, chain, depth, cycle)
     * now; the callee's and the budget's once the pipeline knows the agent and the price; the budget taken under the
     * chain row's lock in the pipeline's reservation transaction.
     */
    const fund = (req: ExecuteRequest, header: string, async: boolean) =>
      Effect.gen(function* () {
        if (async || req.callbackUrl !== undefined || req.webhookUrl !== undefined) {
          const message = "chained calls are answered synchronously (no async=true, callbackUrl or webhookUrl)"
          return yield* new BadRequest({ code: "VALIDATION_ERROR", message, details: { issues: [{ path: "X-Chain-Token", message }] } })
        }
        const token = yield* tokens.check(header)
        const now = yield* Clock.currentTimeMillis
        const chain = yield* repo.find(token.cid).pipe(Effect.orDie)
        yield* gate(chain, token.cid, 0n, now)
        const { maxDepth, payer } = Option.getOrThrow(chain)
        if (token.d > maxDepth) {
          return yield* new BadRequest({
            code: "DEPTH_LIMIT",
            message: `the chain allows calls down to depth ${maxDepth}`,
            details: { currentDepth: token.d, maxDepth }
          })
        }
        const cycle = cycleOf(token, req.targetAgentId)
        if (cycle !== null) {
          return yield* new BadRequest({ code: "CIRCULAR_DEPENDENCY", message: "the target agent is already in this call chain", details: { chain: cycle } })
        }
        const caller = token.cc[token.cc.length - 1] ?? token.pa ?? ""

        /** The budget taken (one UPDATE under the chain row's lock), the chain's events, the callee's token. */
        const reserve: ChainBudgetFunding["reserve"] = ({ requestId, transactionId, agentId, price }) =>
          Effect.gen(function* () {
            const reservation = yield* repo.reserve(token.cid, price, new Date(now - CHAIN_TIMEOUT_MS))
            // Refused by the row itself (ended, too old, or concurrent calls took the budget): say which; nothing is reserved.
            if (Option.isNone(reservation)) return yield* refused(token.cid, price, now)
            const r = reservation.value
            const event = { chainId: token.cid, requestId, transactionId, agentId, parentRequestId: token.pe, depth: token.d }
            const statements = [
              outbox.emitStatement("chain.child_spawned", r.rootAgentId, { ...event, cost: formatUsdc(price), remainingBudget: formatUsdc(r.remaining) }),
              ...(token.d === maxDepth ? [outbox.emitStatement("chain.depth_limit", r.rootAgentId, { ...event, maxDepth })] : []),
              ...(r.warn
                ? [outbox.emitStatement("chain.budget_warning", r.rootAgentId, { chainId: token.cid, totalBudget: formatUsdc(r.totalBudget), remainingBudget: formatUsdc(r.remaining), threshold: "20%" })]
                : [])
            ]
            return { statements, callContext: callContext(token, { maxDepth, payer }, r, agentId, requestId) }
          })

        return {
          _tag: "ChainBudget",
          chainId: token.cid,
          depth: token.d,
          parentExecutionId: token.pe,
          payer,
          now,
          admit: (agent, price) => Effect.zipRight(calleeAccepts(agent, caller), gate(chain, token.cid, price, now)),
          reserve,
          info: (readHandle) =>
            Effect.map(infoFor(token), (info) => Option.match(readHandle, { onNone: () => info, onSome: (handle) => ({ ...info, readHandle: handle }) }))
        } satisfies ChainBudgetFunding
      }).pipe(withSpan("ChainCalls.fund"))

    /** The callee hires in turn with a token one level deeper, its own span in the chain's trace. */
    const callContext = (token: ChainTokenPayload, chain: { readonly maxDepth: number; readonly payer: string }, reserved: Reserved, agentId: string, requestId: string) =>
      Effect.gen(function* () {
        const spanId = newSpanId()
        const forwarded = yield* tokens.issue({
          cid: token.cid,
          d: token.d + 1,
          md: chain.maxDepth,
          rb: formatUsdc(reserved.remaining),
          tb: token.tb,
          pa: agentId,
          rw: chain.payer,
          sa: token.sa,
          cc: [...token.cc, agentId],
          pe: requestId,
          ...(token.tid === undefined ? {} : { tid: token.tid }),
          sid: spanId
        })
        return { chainToken: forwarded, ...(token.tid === undefined ? {} : { traceparent: `00-${token.tid}-${spanId}-01` }) } satisfies CallContext
      })

    return { fund } as const
  }),
  dependencies: [ChainTokens.Default, ChainsRepo.Default, Outbox.Default]
}) {}
