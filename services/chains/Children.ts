// A sub-call inside a chain: POST /execute with X-Chain-Token and no payment. Every refusal (token, chain, depth, cycle,
// the callee's settings and standing, the budget) comes before anything is reserved; then one transaction reserves the
// price from the chain's budget (one UPDATE under the chain row's lock) and holds it in the call's escrow.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import { DEFAULT_EXECUTION_TIMEOUT_MS } from "../../layers/AgentProxy.js"
import { sha256 } from "../../layers/x402/payment.js"
import { CHAIN_TIMEOUT_MS } from "../../machines/chain.js"
import { executionMachine } from "../../machines/execution.js"
import { MachineHost } from "../../machines/Host.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import type { AgentRecord } from "../../src/domain/Agent.js"
import { BadRequest, BudgetExceeded, ChainTimeout, Conflict, Forbidden, NotFound, RateLimited } from "../../src/domain/Errors.js"
import type { ExecuteRequest, ExecutionView } from "../../src/domain/Execution.js"
import { newId, newPaymentId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { Agents } from "../agents/Agents.js"
import { JsonSchemas } from "../agents/JsonSchemas.js"
import { batch } from "../sql/Batch.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import { Circuits } from "../circuits/Circuits.js"
import { AgentCall } from "../executions/AgentCall.js"
import { canonical, executionStatements } from "../executions/create.js"
import { quoteOf } from "../../src/domain/Pricing.js"
import { prepare } from "../executions/prepare.js"
import { type LimitsSeen, RateLimits } from "../executions/RateLimits.js"
import { ExecutionsRepo } from "../executions/Repo.js"
import * as View from "../executions/View.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { type ChainRow, ChainsRepo, type Reserved } from "./Repo.js"
import { ChainRoots, newSpanId } from "./Root.js"
import { cycleOf } from "./token.js"
import type { ChainTokenPayload } from "./token.js"
import { ChainTokens } from "./Tokens.js"

/** Spec: a chained callee needs a reputation of at least 40. */
export const MIN_CHAIN_REPUTATION = 40
const DEADLINE_GRACE_MS = 60_000

/** A chained call's read-back handle: 256 random bits (docs/chains.md, "Reading a call's result again"). */
export const newReadHandle = () => `chr_${randomBytes(32).toString("base64url")}`

const ended = (chain: ChainRow) => chain.status === "completed" || chain.status === "failed" || chain.status === "partial"

export class ChainCalls extends Effect.Service<ChainCalls>()("chains/ChainCalls", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const tokens = yield* ChainTokens
    const repo = yield* ChainsRepo
    const roots = yield* ChainRoots
    const check = yield* prepare
    const rateLimits = yield* RateLimits
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const host = yield* MachineHost
    const agentCall = yield* AgentCall
    const circuits = yield* Circuits
    const executions = yield* ExecutionsRepo
    const timeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS))
    const retryWindowMs = 1000 * (yield* Config.integer("EXECUTION_RETRY_WINDOW_SECONDS").pipe(Config.withDefault(600)))

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

    /** `readHandle`: only in the answer that created the call (the service keeps its hash, never the handle). */
    const answer = (id: string, token: ChainTokenPayload, readHandle?: string) =>
      Effect.gen(function* () {
        const row = Option.getOrThrow(yield* executions.find(id).pipe(Effect.orDie))
        const chain = yield* infoFor(token)
        return {
          ...View.forClient(row, true),
          transactionId: row.transactionId,
          chain: readHandle === undefined ? chain : { ...chain, readHandle }
        } satisfies ExecutionView
      })

    /** `limits`: where the paying client's windows are noted once counted (X-RateLimit-* on the answer). */
    const call = (req: ExecuteRequest, header: string, async: boolean, limits?: LimitsSeen) =>
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
        const { agent, capability } = yield* check(req)
        const caller = token.cc[token.cc.length - 1] ?? token.pa ?? ""
        yield* calleeAccepts(agent, caller)
        const { agentFee, price } = quoteOf(capability)
        yield* gate(chain, token.cid, price, now)
        const requestHash = sha256(canonical({ targetAgentId: req.targetAgentId, capabilityId: req.capabilityId, input: req.input }))
        const repeat = (existing: { readonly id: string; readonly requestHash: string }) =>
          existing.requestHash === requestHash
            ? answer(existing.id, token)
            : Effect.fail(new Conflict({ code: "IDEMPOTENCY_CONFLICT", message: "this idempotencyKey was used with a different agent, capability or input", details: { requestId: existing.id } }))
        // Sub-calls count against the paying client's window (the chain's payer), like its own calls (a repeat
        // of an idempotent sub-call too, as a paid repeat is).
        const window = yield* rateLimits.consume(agent.id, payer, limits).pipe(Effect.orDie)
        if (window.exceeded) {
          yield* rateLimits.release(agent.id, payer, limits).pipe(Effect.orDie)
          return yield* new RateLimited({
            code: "RATE_LIMITED",
            message: "too many requests in the current window; nothing was reserved",
            details: { retryAfterSeconds: window.resetSeconds, ...rateLimits.limits }
          })
        }
        if (req.idempotencyKey !== undefined) {
          const existing = yield* executions.findIdempotent(payer, req.idempotencyKey).pipe(Effect.orDie)
          if (Option.isSome(existing)) return yield* repeat(existing.value)
        }

        const requestId = newId("req")
        const paymentId = newPaymentId()
        // The call's read-back handle (its "payment header" for GET /execute/:id): random, given once to the caller. It
        // must not be computable from public ids (request and chain ids are public); the chain's payer reads with the root's.
        const readHandle = newReadHandle()
        // Paid from the budget: the payment is settled from the start (the budget is treasury money since the root settled).
        const started = startMachine(executionMachine, { retryWindowMs, deadlineMs: timeoutMs + DEADLINE_GRACE_MS, startedAt: now, chained: true })
        const settled = stepMachine(executionMachine, started.persisted, { type: "PAYMENT_SETTLED", at: now })
        const created = executionStatements(sql, {
          requestId,
          paymentId,
          payer,
          agentId: agent.id,
          capabilityId: capability.id,
          input: req.input,
          requestHash,
          idempotencyKey: req.idempotencyKey,
          mode: "sync",
          callbackUrl: undefined,
          agentFee,
          start: { ...started, snapshot: settled.snapshot, persisted: settled.persisted },
          now,
          chain: { chainId: token.cid, depth: token.d, parentExecutionId: token.pe }
        })
        const hold = yield* ledger.transferStatements({
          kind: "chain_spend",
          movements: [{ debit: Accounts.chainBudgets, credit: Accounts.escrow, amount: price }],
          paymentId,
          agentId: agent.id,
          subjectId: requestId
        }).pipe(Effect.orDie)
        type Reservation = { readonly _tag: "Reserved"; readonly reserved: Reserved } | { readonly _tag: "Repeat"; readonly view: ExecutionView }
        const made = yield* sql.withTransaction(
          Effect.gen(function* () {
            // Lock order: the parent execution (its key, which the new row's foreign key needs) before the chain row, as
            // a failing parent's step does (its row, then the chain's to give its reservation back): no deadlock.
            yield* sql`SELECT 1 FROM executions WHERE id = ${token.pe} FOR KEY SHARE`
            const reservation = yield* repo.reserve(token.cid, price, new Date(now - CHAIN_TIMEOUT_MS))
            // Refused by the row itself (ended, too old, or concurrent calls took the budget): say which; nothing is reserved.
            if (Option.isNone(reservation)) return yield* refused(token.cid, price, now)
            const r = reservation.value
            const event = { chainId: token.cid, requestId, transactionId: created.transactionId, agentId: agent.id, parentRequestId: token.pe, depth: token.d }
            yield* batch(sql, [
              sql`INSERT INTO payments (id, purpose, subject_id, payer, pay_to, asset, network, amount, nonce, valid_after, valid_before,
                                        signature, header_sha256, status, tx_hash, settled_at)
                  SELECT ${paymentId}, 'chain', ${requestId}, payer, pay_to, asset, network, ${price.toString()}, ${`0x${randomBytes(32).toString("hex")}`},
                         0, 0, 'chain-budget', ${sha256(readHandle)}, 'settled', tx_hash, ${new Date(now)}
                  FROM payments WHERE id = (SELECT payment_id FROM chains WHERE id = ${token.cid})`,
              ...created.statements,
              ...hold.statements,
              outbox.emitStatement("chain.child_spawned", r.rootAgentId, { ...event, cost: formatUsdc(price), remainingBudget: formatUsdc(r.remaining) }),
              ...(token.d === maxDepth ? [outbox.emitStatement("chain.depth_limit", r.rootAgentId, { ...event, maxDepth })] : []),
              ...(r.warn
                ? [outbox.emitStatement("chain.budget_warning", r.rootAgentId, { chainId: token.cid, totalBudget: formatUsdc(r.totalBudget), remainingBudget: formatUsdc(r.remaining), threshold: "20%" })]
                : [])
            ])
            return { _tag: "Reserved", reserved: r } satisfies Reservation
          })
        ).pipe(
          Effect.catchTag("SqlError", (error): Effect.Effect<Reservation, Conflict> =>
            isUniqueViolation(error, "executions_idempotency") && req.idempotencyKey !== undefined
              ? Effect.flatMap(executions.findIdempotent(payer, req.idempotencyKey).pipe(Effect.orDie), (existing) =>
                Option.isSome(existing) ? Effect.map(repeat(existing.value), (view) => ({ _tag: "Repeat", view }) satisfies Reservation) : Effect.die(error))
              : Effect.die(error)),
          Effect.tapError(() => rateLimits.release(agent.id, payer, limits).pipe(Effect.orDie))
        )
        if (made._tag === "Repeat") return made.view
        const reserved = made.reserved

        // The callee hires in turn with a token one level deeper, its own span in the chain's trace.
        const spanId = newSpanId()
        const forwarded = yield* tokens.issue({
          cid: token.cid,
          d: token.d + 1,
          md: maxDepth,
          rb: formatUsdc(reserved.remaining),
          tb: token.tb,
          pa: agent.id,
          rw: payer,
          sa: token.sa,
          cc: [...token.cc, agent.id],
          pe: requestId,
          ...(token.tid === undefined ? {} : { tid: token.tid }),
          sid: spanId
        })
        const outcome = yield* agentCall.call({ id: requestId, input: req.input }, agent, capability, {
          chainToken: forwarded,
          ...(token.tid === undefined ? {} : { traceparent: `00-${token.tid}-${spanId}-01` })
        })
        yield* host.deliverNow("execution", requestId, outcome.event).pipe(Effect.orDie)
        yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
        yield* roots.check(token.cid).pipe(Effect.orDie)
        return yield* answer(requestId, token, readHandle)
      }).pipe(Effect.withSpan("ChainCalls.call"))

    return { call } as const
  }),
  dependencies: [ChainTokens.Default, ChainsRepo.Default, ChainRoots.Default, RateLimits.Default, Agents.Default, JsonSchemas.Default, UrlGuard.Default, Ledger.Default, Outbox.Default, MachineHost.Default, AgentCall.Default, Circuits.Default, ExecutionsRepo.Default]
}) {}
