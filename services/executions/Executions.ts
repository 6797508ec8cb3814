// Paid executions, in the spec's order: everything checked before payment, the payment verified and held in escrow in
// one statement, settlement and the agent call in parallel, both recorded in one transaction; retries and status views.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Effect, Fiber, Option } from "effect"
import { DEFAULT_EXECUTION_TIMEOUT_MS } from "../../layers/AgentProxy.js"
import { AppConfig } from "../../layers/Config.js"
import { type PaymentRejected, sha256 } from "../../layers/x402/payment.js"
import { executionMachine, executionStatus } from "../../machines/execution.js"
import { historyStatement, MachineHost, scheduleStatement } from "../../machines/Host.js"
import { actionsOf, startMachine } from "../../machines/step.js"
import type { AgentRecord } from "../../src/domain/Agent.js"
import { Conflict, Forbidden, NotFound, RateLimited } from "../../src/domain/Errors.js"
import type { ExecuteRequest, ExecutionView } from "../../src/domain/Execution.js"
import { newEscrowId, newId, newTransactionId } from "../../src/domain/Ids.js"
import { EXECUTION_PLATFORM_FEE, formatUsdc, splitAgentFee } from "../../src/domain/Money.js"
import { Agents } from "../agents/Agents.js"
import { batch } from "../sql/Batch.js"
import { Callbacks } from "./Callbacks.js"
import { Circuits } from "../circuits/Circuits.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { Payments } from "../payments/Payments.js"
import { Paywall } from "../payments/Paywall.js"
import { RateLimits } from "./RateLimits.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import { JsonSchemas } from "../agents/JsonSchemas.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { AgentCall } from "./AgentCall.js"
import { prepare } from "./prepare.js"
import { ExecutionsRepo } from "./Repo.js"
import * as View from "./View.js"

/** Extra time past the agent timeout after which a running attempt with no recorded result is declared dead. */
const DEADLINE_GRACE_MS = 60_000

/** Deterministic JSON (sorted keys) so the same request always hashes the same. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(value) ?? "null"

/** Database and ledger-invariant failures are bugs or outages, not answers: they surface as 500s (and are logged). */
const infrastructureAsDefect = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, { readonly _tag: "SqlError" }> =>
      typeof error === "object" && error !== null && "_tag" in error && error._tag === "SqlError",
    Effect.die
  )

export interface ExecuteContext {
  readonly paymentHeader: string | undefined
  readonly async: boolean
}

/** What the HTTP layer turns into headers: the accepted payment, its settlement, the rate-limit windows. */
export interface PaymentUse {
  readonly header: string
  readonly payer: string
  readonly network: string
  readonly settlementTxHash: string | null
  readonly rateLimit: { readonly agentRemaining: number; readonly clientRemaining: number } | null
}

export type ExecuteOutcome =
  | { readonly _tag: "Done"; readonly view: ExecutionView; readonly payment: PaymentUse }
  | { readonly _tag: "Accepted"; readonly requestId: string; readonly jobId: string | undefined; readonly statusUrl: string; readonly payment: PaymentUse }

export class Executions extends Effect.Service<Executions>()("executions/Executions", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const agents = yield* Agents
    const paywall = yield* Paywall
    const payments = yield* Payments
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const host = yield* MachineHost
    const circuits = yield* Circuits
    const rateLimits = yield* RateLimits
    const callbacks = yield* Callbacks
    const repo = yield* ExecutionsRepo
    const agentCall = yield* AgentCall
    const check = yield* prepare
    const timeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS))
    const retryWindowMs = 1000 * (yield* Config.integer("EXECUTION_RETRY_WINDOW_SECONDS").pipe(Config.withDefault(600)))
    // Work started by a request outlives it (a client hanging up must not abandon a paid execution).
    const scope = yield* Effect.scope

    const load = (id: string) => repo.find(id).pipe(Effect.orDie)

    /** A repeat of an idempotent request: the cached result or current status; the new payment is not used. */
    const repeat = (existing: { readonly id: string; readonly requestHash: string }, requestHash: string, payment: PaymentUse) =>
      Effect.gen(function* () {
        if (existing.requestHash !== requestHash) {
          return yield* new Conflict({
            code: "IDEMPOTENCY_CONFLICT",
            message: "this idempotencyKey was used with a different agent, capability or input",
            details: { requestId: existing.id }
          })
        }
        const row = Option.getOrThrow(yield* load(existing.id))
        // The caller proved to be the same payer (its payment header verified), so the result is theirs to read.
        return { _tag: "Done", view: View.forClient(row, true), payment } satisfies ExecuteOutcome
      })

    const execute = (req: ExecuteRequest, ctx: ExecuteContext) =>
      Effect.gen(function* () {
        const { agent, capability, callbackUrl } = yield* check(req)
        const agentFee = capability.pricing.basePrice
        const price = EXECUTION_PLATFORM_FEE + agentFee
        // Who pays: an x402 payment of exactly the price (chain budgets will decide here too).
        const { payment: verified, priced } = yield* paywall.charge(
          { amount: price, resource: `${config.publicBaseUrl}/api/v1/execute`, description: `${agent.name}: ${capability.name}` },
          ctx.paymentHeader
        )
        // Rate limits key on the verified payer: a claimed address in an unverified header cannot spend another's window.
        const window = yield* rateLimits.consume(agent.id, verified.payer)
        const giveBack = rateLimits.release(agent.id, verified.payer)
        if (window.exceeded) {
          yield* giveBack
          return yield* new RateLimited({
            code: "RATE_LIMITED",
            message: "too many requests in the current window; nothing was charged",
            details: { retryAfterSeconds: window.resetSeconds, ...rateLimits.limits }
          })
        }
        const payment: PaymentUse = {
          header: (ctx.paymentHeader ?? "").trim(),
          payer: verified.payer,
          network: paywall.network,
          settlementTxHash: null,
          rateLimit: { agentRemaining: window.agentRemaining, clientRemaining: window.clientRemaining }
        }
        const requestHash = sha256(canonical({ targetAgentId: req.targetAgentId, capabilityId: req.capabilityId, input: req.input }))
        if (req.idempotencyKey !== undefined) {
          const existing = yield* repo.findIdempotent(verified.payer, req.idempotencyKey)
          if (Option.isSome(existing)) return yield* repeat(existing.value, requestHash, payment)
        }

        const now = yield* Clock.currentTimeMillis
        const requestId = newId(ctx.async ? "job" : "req")
        const { agentEarnings, platformCut } = splitAgentFee(agentFee)
        const start = startMachine(executionMachine, { retryWindowMs, deadlineMs: timeoutMs + DEADLINE_GRACE_MS, startedAt: now })
        // Everything the accepted payment causes, as ONE statement (atomic on its own, one round trip): the reservation,
        // the execution with its machine snapshot, the escrow, the ledger hold, the outbox event, the deadline timer and
        // the first transitions.
        const reservation = payments.reserveStatements(verified, "execution", requestId, now)
        const paymentId = reservation.id
        const escrowId = newEscrowId()
        // The payment is held in escrow from the moment it is accepted, backed by the settlement it is owed.
        const hold = yield* ledger.transferStatements({
          kind: "escrow_hold",
          movements: [{ debit: Accounts.settlementReceivable, credit: Accounts.escrow, amount: price }],
          paymentId,
          agentId: agent.id,
          subjectId: requestId
        }).pipe(Effect.orDie)
        const created = yield* batch(sql, [
          ...reservation.statements,
          sql`INSERT INTO executions ${sql.insert({
            id: requestId,
            transactionId: newTransactionId(),
            escrowId,
            paymentId,
            payer: verified.payer,
            agentId: agent.id,
            capabilityId: capability.id,
            input: JSON.stringify(req.input),
            requestHash,
            idempotencyKey: req.idempotencyKey ?? null,
            mode: callbackUrl !== undefined ? "callback" : ctx.async ? "async" : "sync",
            callbackUrl: callbackUrl ?? null,
            status: executionStatus(start.state, start.snapshot.context),
            state: start.state,
            machineSnapshot: JSON.stringify(start.persisted),
            price: price.toString(),
            platformFee: EXECUTION_PLATFORM_FEE.toString(),
            agentFee: agentFee.toString(),
            platformCut: platformCut.toString(),
            agentEarnings: agentEarnings.toString(),
            createdAt: new Date(now),
            updatedAt: new Date(now)
          })}`,
          sql`INSERT INTO escrows ${sql.insert({ id: escrowId, executionId: requestId, agentId: agent.id, amount: price.toString(), status: "held" })}`,
          ...hold.statements,
          outbox.emitStatement("payment.received", agent.id, {
            paymentId,
            purpose: "execution",
            requestId,
            agentId: agent.id,
            amount: formatUsdc(price),
            payer: verified.payer
          }),
          ...actionsOf(start, "scheduleTimer").map((timer) => scheduleStatement(sql, "execution", requestId, { type: timer.event, at: timer.at })),
          ...(callbackUrl === undefined ? [] : [callbacks.armStatement(requestId, callbackUrl)]),
          historyStatement(sql, [{ machine: "execution", actorId: requestId, event: { type: "CREATED" }, from: null, to: start.state, at: now }])
        ]).pipe(
          Effect.as({ paymentId }),
          Effect.catchTag("SqlError", (error): Effect.Effect<ExecuteOutcome, Conflict | PaymentRejected> =>
            isUniqueViolation(error, "executions_idempotency") && req.idempotencyKey !== undefined
              ? Effect.flatMap(repo.findIdempotent(verified.payer, req.idempotencyKey).pipe(Effect.orDie), (existing) =>
                Option.isSome(existing) ? repeat(existing.value, requestHash, payment) : Effect.die(error))
              : payments.alreadyUsed(error).pipe(Effect.catchTag("SqlError", Effect.die))),
          Effect.catchTag("PaymentRejected", (rejection) => Effect.zipRight(giveBack, Effect.fail(priced.refuse(rejection))))
        )
        if ("_tag" in created) return created

        // Settle on chain and call the agent at the same time, then record both in one transaction; the machine releases
        // the output only once both are in. A crash in between is finished by the recovery workers and the deadline timer.
        const work = Effect.gen(function* () {
          const [settlement, outcome] = yield* Effect.all(
            [payments.settleOnChain(created.paymentId, verified, priced.accepts[0]!), agentCall.call({ id: requestId, input: req.input }, agent, capability)],
            { concurrency: "unbounded" }
          )
          yield* sql.withTransaction(Effect.zipRight(host.deliver("execution", requestId, outcome.event), payments.recordIn(created.paymentId, settlement)))
          yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
        }).pipe(Effect.catchAllCause((cause) => Effect.logError(`execution ${requestId}: background work failed; workers will finish it`, cause)))
        const fiber = yield* Effect.forkIn(work, scope)
        const statusUrl = `${config.publicBaseUrl}/api/v1/execute/${requestId}`
        if (ctx.async || callbackUrl !== undefined) {
          return { _tag: "Accepted", requestId, jobId: ctx.async ? requestId : undefined, statusUrl, payment } satisfies ExecuteOutcome
        }
        yield* Fiber.join(fiber)
        const row = Option.getOrThrow(yield* load(requestId))
        const settledHash = row.settlementState === "settled" ? row.settlementTxHash : null
        return { _tag: "Done", view: View.forClient(row, true), payment: { ...payment, settlementTxHash: settledHash } } satisfies ExecuteOutcome
      }).pipe(infrastructureAsDefect, Effect.withSpan("Executions.execute"))

    /** Status for anyone; output and cost only for the holder of the original payment header. */
    const status = (id: string, paymentHeader: string | undefined) =>
      Effect.gen(function* () {
        const row = yield* load(id)
        if (Option.isNone(row)) return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${id}` })
        const reveal = paymentHeader !== undefined && sha256(paymentHeader.trim()) === row.value.headerSha256
        return View.forClient(row.value, reveal)
      })

    /** Re-runs a failed or timed-out execution on its original payment (authorised by the same X-PAYMENT). */
    const retry = (id: string, paymentHeader: string | undefined) =>
      Effect.gen(function* () {
        const found = yield* load(id)
        if (Option.isNone(found)) return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${id}` })
        const row = found.value
        if (paymentHeader === undefined || sha256(paymentHeader.trim()) !== row.headerSha256) {
          return yield* new Forbidden({ code: "RETRY_NOT_AUTHORIZED", message: "send the X-PAYMENT header of the original execution" })
        }
        const record = yield* agents.loadRecord(row.agentId as AgentRecord["id"])
        const agent = Option.getOrUndefined(record)
        const capability = agent?.capabilities.find((c) => c.id === row.capabilityId)
        if (agent === undefined || agent.status !== "active" || capability === undefined) {
          return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: "the agent or its capability is no longer available; the payment is refunded when the retry window closes" })
        }
        yield* circuits.check(agent)
        const at = yield* Clock.currentTimeMillis
        const accepted = yield* host.deliverNow("execution", id, { type: "RETRY", at })
        if (Option.isNone(accepted) || !accepted.value.changed) {
          return yield* new Conflict({
            code: "EXECUTION_NOT_RETRYABLE",
            message: "only a failed or timed-out execution can be retried, within its retry window",
            details: { status: row.status, ...(row.retryUntil === null ? {} : { retryUntil: row.retryUntil.toISOString() }) }
          })
        }
        const attempt = Effect.gen(function* () {
          const outcome = yield* agentCall.call(row, agent, capability)
          yield* host.deliverNow("execution", row.id, outcome.event)
          yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
        }).pipe(Effect.catchAllCause((cause) => Effect.logError(`retry of ${id} failed`, cause)))
        yield* Fiber.join(yield* Effect.forkIn(attempt, scope))
        return View.forClient(Option.getOrThrow(yield* load(id)), true)
      }).pipe(infrastructureAsDefect, Effect.withSpan("Executions.retry"))

    return { execute, status, retry } as const
  }),
  dependencies: [Agents.Default, Paywall.Default, Payments.Default, Ledger.Default, Outbox.Default, MachineHost.Default, Circuits.Default, RateLimits.Default, Callbacks.Default, ExecutionsRepo.Default, AgentCall.Default, JsonSchemas.Default, UrlGuard.Default]
}) {}
