// Paid executions: validation before payment, payment + escrow in one transaction, settlement and the agent call in
// parallel, the execution machine deciding where the held money goes, retries, refunds and status views.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Config, Effect, Either, Fiber, Option, Schema } from "effect"
import { AgentProxy, DEFAULT_EXECUTION_TIMEOUT_MS } from "../layers/AgentProxy.js"
import { AppConfig } from "../layers/Config.js"
import { decodePaymentHeader, type PaymentRejected, PaymentVerifier, sha256, type VerifiedPayment } from "../layers/PaymentVerifier.js"
import { UrlGuard } from "../layers/UrlGuard.js"
import { type ExecutionEvent, executionMachine, executionStatus } from "../machines/execution.js"
import type { AgentRecord, Capability } from "../src/domain/Agent.js"
import {
  BadRequest,
  Conflict,
  Forbidden,
  NotFound,
  PaymentRequired,
  type PaymentRequirements,
  RateLimited
} from "../src/domain/Errors.js"
import type { ExecuteRequest, ExecutionView } from "../src/domain/Execution.js"
import { newEscrowId, newId, newTransactionId } from "../src/domain/Ids.js"
import { unstorableStrings } from "../src/domain/Json.js"
import { EXECUTION_PLATFORM_FEE, formatUsdc, splitAgentFee } from "../src/domain/Money.js"
import { settlementPolicy } from "../src/domain/Trust.js"
import { Agents } from "./Agents.js"
import { batch } from "./Batch.js"
import { Callbacks } from "./Callbacks.js"
import { Circuits } from "./Circuits.js"
import { JsonSchemas } from "./JsonSchemas.js"
import { Accounts, Ledger, type Movement } from "./Ledger.js"
import { actionsOf, Machines, type PersistedSnapshot, startMachine, stepMachine } from "./Machines.js"
import { Outbox } from "./Outbox.js"
import { isUniqueViolation } from "./SqlErrors.js"
import { type PaymentRow, Payments } from "./Payments.js"
import { RateLimits } from "./RateLimits.js"
import { Refunds } from "./Refunds.js"
import { Reputation } from "./Reputation.js"

/** Database and ledger-invariant failures are bugs or outages, not answers: they surface as 500s (and are logged). */
const infrastructureAsDefect = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, { readonly _tag: "SqlError" | "LedgerInvariantError" }> =>
      typeof error === "object" && error !== null && "_tag" in error && (error._tag === "SqlError" || error._tag === "LedgerInvariantError"),
    Effect.die
  )

/** Extra time past the agent timeout after which a running attempt with no recorded result is declared dead. */
const DEADLINE_GRACE_MS = 60_000

const ExecutionRow = Schema.Struct({
  id: Schema.String,
  transactionId: Schema.String,
  escrowId: Schema.String,
  paymentId: Schema.String,
  payer: Schema.String,
  agentId: Schema.String,
  capabilityId: Schema.String,
  input: Schema.Unknown,
  requestHash: Schema.String,
  idempotencyKey: Schema.NullOr(Schema.String),
  mode: Schema.Literal("sync", "async", "callback"),
  callbackUrl: Schema.NullOr(Schema.String),
  status: Schema.Literal("pending", "completed", "failed", "timeout", "refunded"),
  state: Schema.String,
  machineSnapshot: Schema.Unknown,
  output: Schema.NullOr(Schema.Unknown),
  error: Schema.NullOr(Schema.String),
  errorKind: Schema.NullOr(Schema.String),
  executionTimeMs: Schema.NullOr(Schema.Number),
  attempts: Schema.Number,
  price: Schema.BigInt,
  platformFee: Schema.BigInt,
  agentFee: Schema.BigInt,
  platformCut: Schema.BigInt,
  agentEarnings: Schema.BigInt,
  depth: Schema.Number,
  retryUntil: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  completedAt: Schema.NullOr(Schema.DateFromSelf),
  settlementState: Schema.Literal("reserved", "retrying", "settled", "failed"),
  settlementTxHash: Schema.NullOr(Schema.String),
  headerSha256: Schema.String,
  escrowStatus: Schema.String,
  refundStatus: Schema.NullOr(Schema.String),
  refundTxHash: Schema.NullOr(Schema.String)
})
export type ExecutionRow = typeof ExecutionRow.Type
const decodeRow = Schema.decodeUnknown(ExecutionRow)

const TimerEvent = Schema.Union(
  Schema.Struct({ type: Schema.Literal("RETRY_WINDOW_CLOSED", "RELEASE_DUE", "AGENT_DEADLINE"), at: Schema.Number })
)

const isPersisted = (value: unknown): value is PersistedSnapshot =>
  typeof value === "object" && value !== null && "value" in value && "context" in value

/** Deterministic JSON (sorted keys) so the same request always hashes the same. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(value) ?? "null"

const settlementStatus = (state: ExecutionRow["settlementState"]) =>
  state === "settled" ? "settled" as const : state === "reserved" ? "settlement_pending" as const : "settlement_failed" as const

export interface RequestContext {
  readonly paymentHeader: string | undefined
  /** The caller's address, used as the client key when no payment header names the payer. */
  readonly clientAddress: string
  readonly async: boolean
  /** Response headers the caller should send whatever the outcome (rate limits, payment used/response). */
  readonly setHeaders: (headers: Record<string, string>) => Effect.Effect<void>
}

export type ExecuteOutcome =
  | { readonly _tag: "Done"; readonly view: ExecutionView }
  | { readonly _tag: "Accepted"; readonly requestId: string; readonly jobId: string | undefined; readonly statusUrl: string }

export class Executions extends Effect.Service<Executions>()("Executions", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const agents = yield* Agents
    const schemas = yield* JsonSchemas
    const urlGuard = yield* UrlGuard
    const verifier = yield* PaymentVerifier
    const payments = yield* Payments
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const machines = yield* Machines
    const proxy = yield* AgentProxy
    const circuits = yield* Circuits
    const reputation = yield* Reputation
    const rateLimits = yield* RateLimits
    const refunds = yield* Refunds
    const callbacks = yield* Callbacks
    const timeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS))
    const retryWindowMs = 1000 * (yield* Config.integer("EXECUTION_RETRY_WINDOW_SECONDS").pipe(Config.withDefault(600)))
    // Work started by a request outlives it (a client hanging up must not abandon a paid execution).
    const scope = yield* Effect.scope

    const load = (id: string, lock = false) =>
      sql`
        SELECT e.*, p.status AS settlement_state, p.tx_hash AS settlement_tx_hash, p.header_sha256,
               s.status AS escrow_status, r.status AS refund_status, r.tx_hash AS refund_tx_hash
        FROM executions e
        JOIN payments p ON p.id = e.payment_id
        JOIN escrows s ON s.execution_id = e.id
        LEFT JOIN refunds r ON r.execution_id = e.id
        WHERE e.id = ${id} ${lock ? sql`FOR UPDATE OF e` : sql``}`.pipe(
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeed(Option.none()) : Effect.map(decodeRow(rows[0]), Option.some))),
        Effect.orDie
      )

    const view = (row: ExecutionRow, reveal: boolean): ExecutionView => {
      const settled = row.settlementState === "settled"
      const showOutput = reveal && row.status === "completed" && settled && row.output !== null
      return {
        requestId: row.id,
        status: row.status,
        ...(showOutput ? { output: row.output } : {}),
        executionTime: row.executionTimeMs,
        ...(reveal ? { cost: { agentFee: formatUsdc(row.agentFee), platformFee: formatUsdc(row.platformFee), total: formatUsdc(row.price) } } : {}),
        settlement: { status: settlementStatus(row.settlementState), txHash: row.settlementTxHash },
        attempts: row.attempts,
        ...(row.retryUntil === null || row.status === "completed" ? {} : { retryUntil: row.retryUntil.toISOString() }),
        ...(row.error === null || row.status === "completed" ? {} : { error: row.error }),
        ...(row.refundStatus === null ? {} : { refund: { status: row.refundStatus, txHash: row.refundTxHash } }),
        ...(!reveal
          ? { message: "output and cost are returned only with the X-PAYMENT header used for this execution" }
          : row.status === "completed" && !settled
          ? { message: "the output is released once the payment settles on chain" }
          : {})
      }
    }

    /** One movement of an execution's escrow: the balanced ledger transfer and the escrow's new status, together. */
    const moveEscrow = (row: ExecutionRow, kind: string, status: "released" | "refunding" | "refunded" | "void", at: number, movements: ReadonlyArray<Movement>) =>
      Effect.zipRight(
        ledger.transfer({ kind, movements, paymentId: row.paymentId, agentId: row.agentId, subjectId: row.id }),
        sql`UPDATE escrows SET status = ${status}, updated_at = ${new Date(at)}${status === "released" ? sql`, released_at = ${new Date(at)}` : sql``}
            WHERE id = ${row.escrowId}`
      )

    /** Where a result post goes and what it says, once a state gives the client something final to hear. */
    const callbackPayload = (row: ExecutionRow) => ({
      requestId: row.id,
      status: row.status,
      output: row.status === "completed" && row.settlementState === "settled" ? row.output : null,
      executionTime: row.executionTimeMs,
      cost: { agentFee: formatUsdc(row.agentFee), platformFee: formatUsdc(row.platformFee), total: formatUsdc(row.price) },
      ...(row.error === null || row.status === "completed" ? {} : { error: row.error })
    })

    const CALLBACK_STATES = new Set(["completed.released", "completed.held", "completed.unpaid", "failed", "timeout", "refunded", "cancelled"])

    /**
     * Applies one event to the execution's machine inside the caller's transaction: the snapshot, the columns the event
     * carries, the ledger transfers its actions cause, timers, outbox events and the transition history commit together.
     */
    const deliverIn = (id: string, event: ExecutionEvent, columns: Record<string, unknown> = {}) =>
        Effect.gen(function* () {
          const found = yield* load(id, true)
          if (Option.isNone(found)) return Option.none<ExecutionRow>()
          const row = found.value
          if (!isPersisted(row.machineSnapshot)) return yield* Effect.dieMessage(`execution ${id} has no machine snapshot`)
          const step = stepMachine(executionMachine, row.machineSnapshot, event)
          if (!step.changed) return Option.none<ExecutionRow>()
          const context = step.snapshot.context
          const status = executionStatus(step.state, context)
          const next: ExecutionRow = {
            ...row,
            ...columns,
            status,
            state: step.state,
            attempts: context.attempts,
            retryUntil: context.retryUntil === null ? null : new Date(context.retryUntil)
          }
          const lockingLast: Array<Effect.Effect<void, SqlError.SqlError>> = []
          for (const action of step.actions) {
            switch (action.type) {
              case "recordOutcome": {
                const success = actionsOf<{ success: boolean }>({ actions: [action] }, "recordOutcome")[0]?.success === true
                // Only root executions move reputation (chained children are recorded, not scored). Done last: it locks
                // the agent's row, which every concurrent execution of this agent needs too.
                if (row.depth === 0) lockingLast.push(reputation.recordOutcome(row.agentId, row.id, success))
                yield* success
                  ? outbox.emit("execution.completed", row.agentId, {
                    requestId: row.id,
                    agentId: row.agentId,
                    capabilityId: row.capabilityId,
                    executionTime: next.executionTimeMs,
                    earnings: formatUsdc(row.agentEarnings)
                  })
                  : outbox.emit("execution.failed", row.agentId, {
                    requestId: row.id,
                    agentId: row.agentId,
                    capabilityId: row.capabilityId,
                    error: next.error ?? "failed"
                  })
                break
              }
              case "cancelTimer": {
                for (const timer of actionsOf<{ event: string }>({ actions: [action] }, "cancelTimer")) {
                  yield* machines.cancel("execution", id, timer.event)
                }
                break
              }
              case "scheduleTimer": {
                for (const timer of actionsOf<{ event: "RETRY_WINDOW_CLOSED" | "RELEASE_DUE" | "AGENT_DEADLINE"; at: number }>({ actions: [action] }, "scheduleTimer")) {
                  yield* machines.schedule("execution", id, { type: timer.event, at: timer.at }, timer.at)
                }
                break
              }
              case "releaseEscrow": {
                yield* moveEscrow(row, "escrow_release", "released", event.at, [
                  { debit: Accounts.escrow, credit: Accounts.platformRevenue, amount: row.platformFee + row.platformCut },
                  { debit: Accounts.escrow, credit: Accounts.agentAvailable(row.agentId), amount: row.agentEarnings }
                ])
                const available = yield* ledger.balance(Accounts.agentAvailable(row.agentId))
                yield* outbox.emit("escrow.released", row.agentId, {
                  transactionId: row.transactionId,
                  amount: formatUsdc(row.agentEarnings),
                  newAvailableBalance: formatUsdc(-available)
                })
                break
              }
              case "startRefund": {
                yield* moveEscrow(row, "refund_owed", "refunding", event.at, [
                  { debit: Accounts.escrow, credit: Accounts.refundsPayable, amount: row.price }
                ])
                yield* refunds.create({ executionId: row.id, paymentId: row.paymentId, to: row.payer, amount: row.price })
                break
              }
              case "confirmRefund": {
                yield* moveEscrow(row, "refund_sent", "refunded", event.at, [
                  { debit: Accounts.refundsPayable, credit: Accounts.treasury, amount: row.price }
                ])
                yield* outbox.emit("execution.refunded", row.agentId, {
                  requestId: row.id,
                  amount: formatUsdc(row.price),
                  txHash: event.type === "REFUND_CONFIRMED" ? event.txHash : null
                })
                break
              }
              case "voidEscrow": {
                yield* moveEscrow(row, "escrow_void", "void", event.at, [
                  { debit: Accounts.escrow, credit: Accounts.settlementReceivable, amount: row.price }
                ])
                break
              }
            }
          }
          yield* sql`UPDATE executions SET ${sql.update({
            ...columns,
            status,
            state: step.state,
            machineSnapshot: JSON.stringify(step.persisted),
            attempts: context.attempts,
            retryUntil: next.retryUntil,
            updatedAt: new Date(event.at)
          })} WHERE id = ${id}`
          yield* machines.record("execution", id, [{ event, from: step.from, to: step.state, at: event.at }])
          yield* Effect.all(lockingLast, { discard: true })
          if (step.state === "completed.held" && context.releaseAt !== null) {
            yield* sql`UPDATE escrows SET release_at = ${new Date(context.releaseAt)} WHERE id = ${row.escrowId}`
          }
          if (row.callbackUrl !== null && step.from !== step.state && CALLBACK_STATES.has(step.state)) {
            const settledNow = event.type === "PAYMENT_SETTLED" ? "settled" as const : next.settlementState
            yield* callbacks.ready(id, status === "completed" ? "execution.completed" : "execution.failed", callbackPayload({ ...next, settlementState: settledNow }))
          }
          return Option.some(next)
        }).pipe(Effect.withSpan("Executions.deliver", { attributes: { event: event.type } }))

    /** One event in its own transaction. */
    const deliver = (id: string, event: ExecutionEvent, columns: Record<string, unknown> = {}) => sql.withTransaction(deliverIn(id, event, columns))

    // Timers of the execution machine (retry window, delayed release, dead attempts) arrive here.
    yield* machines.registerTimerHandler("execution", (timer, markFired) =>
      Effect.gen(function* () {
        const event = yield* Schema.decodeUnknown(TimerEvent)(timer.event)
        yield* sql.withTransaction(Effect.zipRight(markFired, deliverIn(timer.actorId, event)))
      }))

    // The payment behind an execution settled or failed for good.
    yield* payments.registerPurpose("execution", {
      onSettled: (payment: PaymentRow) =>
        Effect.gen(function* () {
          yield* ledger.transfer({
            kind: "settlement",
            movements: [{ debit: Accounts.treasury, credit: Accounts.settlementReceivable, amount: payment.amount }],
            paymentId: payment.id,
            subjectId: payment.subjectId
          })
          yield* deliverIn(payment.subjectId, { type: "PAYMENT_SETTLED", at: yield* Clock.currentTimeMillis })
        }).pipe(Effect.orDie),
      onFailed: (payment: PaymentRow, reason: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => deliverIn(payment.subjectId, { type: "PAYMENT_FAILED", at, reason })).pipe(
          Effect.asVoid,
          Effect.orDie
        )
    })

    yield* refunds.setConfirmedHandler((executionId, txHash) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => deliverIn(executionId, { type: "REFUND_CONFIRMED", at, txHash }))
    )

    /** Calls the agent once; the outcome as the machine event to record (with the columns it carries). */
    const callAgent = (row: { readonly id: string; readonly input: unknown }, agent: AgentRecord, capability: Capability) =>
      Effect.gen(function* () {
        const reply = yield* Effect.either(
          proxy.call({ agentId: agent.id, url: agent.endpoints.execution, requestId: row.id, capabilityId: capability.id, input: row.input })
        )
        const at = yield* Clock.currentTimeMillis
        const outcome = Either.flatMap(reply, (ok) => {
          const problems = [
            ...unstorableStrings(ok.body, "output"),
            ...(capability.outputSchema === undefined ? [] : schemas.validate(capability.outputSchema, ok.body, "output"))
          ]
          return problems.length === 0
            ? Either.right(ok)
            : Either.left({
              kind: "invalid_output" as const,
              message: `the agent's output does not match its outputSchema: ${problems.slice(0, 5).map((p) => `${p.path} ${p.message}`).join("; ")}`,
              durationMs: ok.durationMs
            })
        })
        if (Either.isRight(outcome)) {
          return {
            success: true,
            event: { type: "AGENT_SUCCEEDED", at, releaseDelayMs: settlementPolicy(agent.trustTier).delayMs },
            columns: { output: JSON.stringify(outcome.right.body), executionTimeMs: outcome.right.durationMs, completedAt: new Date(at), error: null, errorKind: null }
          } as const
        }
        const failure = outcome.left
        return {
          success: false,
          event: { type: "AGENT_FAILED", at, timedOut: failure.kind === "timeout", error: failure.message },
          columns: { error: failure.message.slice(0, 2000), errorKind: failure.kind, executionTimeMs: failure.durationMs }
        } as const
      }).pipe(Effect.withSpan("Executions.callAgent"))

    /** A retry's attempt: call, record in its own transaction, tell the circuit. */
    const attempt = (row: { readonly id: string; readonly input: unknown }, agent: AgentRecord, capability: Capability) =>
      Effect.gen(function* () {
        const outcome = yield* callAgent(row, agent, capability)
        yield* deliver(row.id, outcome.event, outcome.columns)
        yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
      })

    /** Everything checked before payment: the agent, the capability, the input, the circuit, the callback URL. */
    const prepare = (req: ExecuteRequest) =>
      Effect.gen(function* () {
        const { agent } = yield* agents.get(req.targetAgentId).pipe(
          Effect.filterOrFail(
            ({ agent }) => agent.status === "active",
            () => new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${req.targetAgentId} not found or not active`, details: { agentId: req.targetAgentId } })
          )
        )
        const capability = agent.capabilities.find((c) => c.id === req.capabilityId)
        if (capability === undefined) {
          return yield* new NotFound({
            code: "CAPABILITY_NOT_FOUND",
            message: `the agent has no capability ${req.capabilityId}`,
            details: { capabilityId: req.capabilityId, available: agent.capabilities.map((c) => c.id) }
          })
        }
        const issues = [
          ...unstorableStrings(req.input, "input"),
          ...(capability.inputSchema === undefined ? [] : schemas.validate(capability.inputSchema, req.input, "input"))
        ]
        if (issues.length > 0) {
          return yield* new BadRequest({ code: "VALIDATION_ERROR", message: "input does not match the capability's inputSchema", details: { issues } })
        }
        yield* circuits.check(agent)
        const callbackUrl = req.callbackUrl ?? req.webhookUrl
        if (callbackUrl !== undefined) {
          yield* urlGuard.check(callbackUrl).pipe(
            Effect.mapError((rejected) =>
              new BadRequest({
                code: "VALIDATION_ERROR",
                message: "the callback URL is not allowed",
                details: { issues: [{ path: req.callbackUrl === undefined ? "webhookUrl" : "callbackUrl", message: rejected.reason }] }
              })
            )
          )
        }
        return { agent, capability, callbackUrl }
      })

    /** The payer named by a payment header, unverified: only a rate-limit key, never an identity. */
    const claimedPayer = (header: string | undefined) =>
      header === undefined
        ? Effect.succeed(Option.none<string>())
        : decodePaymentHeader(header).pipe(
          Effect.map((p) => Option.some(p.payload.authorization.from.toLowerCase())),
          Effect.orElseSucceed(() => Option.none<string>())
        )

    /** Who pays for this execution. Today: an x402 payment of exactly `price` (chain budgets will decide here too). */
    const resolvePayment = (header: string | undefined, price: bigint, accepts: ReadonlyArray<PaymentRequirements>) =>
      Effect.gen(function* () {
        const details = { price: formatUsdc(price), wallet: verifier.treasury, network: verifier.network }
        if (header === undefined || header.trim() === "") {
          return yield* new PaymentRequired({
            message: `this call costs ${formatUsdc(price)} USDC: pay with an X-PAYMENT header`,
            accepts,
            details: { reason: "payment_required", ...details }
          })
        }
        return yield* verifier.verify(header, price).pipe(
          Effect.mapError((rejection) =>
            new PaymentRequired({ message: rejection.message, accepts, details: { reason: rejection.reason, ...details, ...rejection.details } })
          )
        )
      })

    const findIdempotent = (payer: string, key: string) =>
      sql<{ id: string; requestHash: string }>`SELECT id, request_hash FROM executions WHERE payer = ${payer} AND idempotency_key = ${key}`.pipe(
        Effect.orDie,
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    /** A repeat of an idempotent request: the cached result or current status; the new payment is not used. */
    const repeat = (existing: { readonly id: string; readonly requestHash: string }, requestHash: string) =>
      Effect.gen(function* () {
        if (existing.requestHash !== requestHash) {
          return yield* new Conflict({
            code: "IDEMPOTENCY_CONFLICT",
            message: "this idempotencyKey was used with a different agent, capability or input",
            details: { requestId: existing.id }
          })
        }
        const row = yield* load(existing.id)
        // The caller proved to be the same payer (its payment header verified), so the result is theirs to read.
        return { _tag: "Done", view: view(Option.getOrThrow(row), true) } satisfies ExecuteOutcome
      })


    const execute = (req: ExecuteRequest, ctx: RequestContext) =>
      Effect.gen(function* () {
        const { agent, capability, callbackUrl } = yield* prepare(req)
        const client = Option.getOrElse(yield* claimedPayer(ctx.paymentHeader), () => `ip:${ctx.clientAddress}`)
        const window = yield* rateLimits.consume(agent.id, client)
        yield* ctx.setHeaders({
          "X-RateLimit-Agent-Remaining": String(window.agentRemaining),
          "X-RateLimit-Client-Remaining": String(window.clientRemaining)
        })
        const giveBack = rateLimits.release(agent.id, client)
        if (window.exceeded) {
          yield* giveBack
          yield* ctx.setHeaders({ "Retry-After": String(window.resetSeconds) })
          return yield* new RateLimited({
            code: "RATE_LIMITED",
            message: "too many requests in the current window; nothing was charged",
            details: { retryAfterSeconds: window.resetSeconds, ...rateLimits.limits }
          })
        }
        const agentFee = capability.pricing.basePrice
        const price = EXECUTION_PLATFORM_FEE + agentFee
        const accepts = [
          verifier.requirements({ amount: price, resource: `${config.publicBaseUrl}/api/v1/execute`, description: `${agent.name}: ${capability.name}` })
        ]
        const verified: VerifiedPayment = yield* resolvePayment(ctx.paymentHeader, price, accepts).pipe(Effect.tapError(() => giveBack))
        yield* ctx.setHeaders({ "X-PAYMENT-USED": (ctx.paymentHeader ?? "").trim() })
        const requestHash = sha256(canonical({ targetAgentId: req.targetAgentId, capabilityId: req.capabilityId, input: req.input }))
        if (req.idempotencyKey !== undefined) {
          const existing = yield* findIdempotent(verified.payer, req.idempotencyKey)
          if (Option.isSome(existing)) return yield* repeat(existing.value, requestHash)
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
          ...actionsOf<{ event: "AGENT_DEADLINE"; at: number }>(start, "scheduleTimer").map((timer) =>
            machines.scheduleStatement("execution", requestId, { type: timer.event, at: timer.at }, timer.at)
          ),
          ...(callbackUrl === undefined ? [] : [callbacks.armStatement(requestId, callbackUrl)]),
          machines.recordStatement([
            reservation.transition,
            { machine: "execution", actorId: requestId, event: { type: "CREATED" }, from: null, to: start.state, at: now }
          ])
        ]).pipe(
          Effect.as({ paymentId }),
          Effect.catchTag("SqlError", (error): Effect.Effect<ExecuteOutcome, Conflict | PaymentRejected> =>
            isUniqueViolation(error, "executions_idempotency") && req.idempotencyKey !== undefined
              ? Effect.flatMap(findIdempotent(verified.payer, req.idempotencyKey), (existing) =>
                Option.isSome(existing) ? repeat(existing.value, requestHash) : Effect.die(error))
              : payments.alreadyUsed(error).pipe(Effect.catchTag("SqlError", Effect.die))),
          Effect.catchTag("PaymentRejected", (rejection) =>
            Effect.zipRight(
              giveBack,
              Effect.fail(
                new PaymentRequired({
                  message: rejection.message,
                  accepts,
                  details: { reason: rejection.reason, price: formatUsdc(price), wallet: verifier.treasury, network: verifier.network }
                })
              )
            ))
        )
        if ("_tag" in created) return created

        // Settle on chain and call the agent at the same time, then record both in one transaction; the machine releases
        // the output only once both are in. A crash in between is finished by the settlement recovery and the deadline timer.
        const work = Effect.gen(function* () {
          const [settlement, outcome] = yield* Effect.all(
            [payments.submit(verified, accepts[0]!), callAgent({ id: requestId, input: req.input }, agent, capability)],
            { concurrency: "unbounded" }
          )
          yield* sql.withTransaction(
            Effect.zipRight(deliverIn(requestId, outcome.event, outcome.columns), payments.recordIn(created.paymentId, settlement))
          )
          yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
        }).pipe(Effect.catchAllCause((cause) => Effect.logError(`execution ${requestId}: background work failed; timers will finish it`, cause)))
        const fiber = yield* Effect.forkIn(work, scope)
        const statusUrl = `${config.publicBaseUrl}/api/v1/execute/${requestId}`
        if (ctx.async || callbackUrl !== undefined) {
          return { _tag: "Accepted", requestId, jobId: ctx.async ? requestId : undefined, statusUrl } satisfies ExecuteOutcome
        }
        yield* Fiber.join(fiber)
        const row = Option.getOrThrow(yield* load(requestId))
        if (row.settlementState === "settled" && row.settlementTxHash !== null) {
          yield* ctx.setHeaders({
            "X-PAYMENT-RESPONSE": Buffer.from(
              JSON.stringify({ success: true, transaction: row.settlementTxHash, network: verifier.network, payer: verified.payer })
            ).toString("base64")
          })
        }
        return { _tag: "Done", view: view(row, true) } satisfies ExecuteOutcome
      }).pipe(infrastructureAsDefect, Effect.withSpan("Executions.execute"))

    /** Status for anyone; output and cost only for the holder of the original payment header. */
    const status = (id: string, paymentHeader: string | undefined) =>
      Effect.gen(function* () {
        const row = yield* load(id)
        if (Option.isNone(row)) return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${id}` })
        const reveal = paymentHeader !== undefined && sha256(paymentHeader.trim()) === row.value.headerSha256
        return view(row.value, reveal)
      })

    /** Re-runs a failed or timed-out execution on its original payment (authorised by the same X-PAYMENT). */
    const retry = (id: string, ctx: RequestContext) =>
      Effect.gen(function* () {
        const found = yield* load(id)
        if (Option.isNone(found)) return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${id}` })
        const row = found.value
        if (ctx.paymentHeader === undefined || sha256(ctx.paymentHeader.trim()) !== row.headerSha256) {
          return yield* new Forbidden({ code: "RETRY_NOT_AUTHORIZED", message: "send the X-PAYMENT header of the original execution" })
        }
        yield* ctx.setHeaders({ "X-PAYMENT-USED": ctx.paymentHeader.trim() })
        const record = yield* agents.loadRecord(row.agentId as AgentRecord["id"])
        const agent = Option.getOrUndefined(record)
        const capability = agent?.capabilities.find((c) => c.id === row.capabilityId)
        if (agent === undefined || agent.status !== "active" || capability === undefined) {
          return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: "the agent or its capability is no longer available; the payment is refunded when the retry window closes" })
        }
        yield* circuits.check(agent)
        const at = yield* Clock.currentTimeMillis
        const accepted = yield* deliver(id, { type: "RETRY", at }, { error: null, errorKind: null })
        if (Option.isNone(accepted)) {
          return yield* new Conflict({
            code: "EXECUTION_NOT_RETRYABLE",
            message: "only a failed or timed-out execution can be retried, within its retry window",
            details: { status: row.status, ...(row.retryUntil === null ? {} : { retryUntil: row.retryUntil.toISOString() }) }
          })
        }
        const fiber = yield* Effect.forkIn(
          attempt(row, agent, capability).pipe(Effect.catchAllCause((cause) => Effect.logError(`retry of ${id} failed`, cause))),
          scope
        )
        yield* Fiber.join(fiber)
        return view(Option.getOrThrow(yield* load(id)), true)
      }).pipe(infrastructureAsDefect, Effect.withSpan("Executions.retry"))

    return { execute, status, retry } as const
  })
}) {}
