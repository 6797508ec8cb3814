// The pipeline with a chain's budget as funding (a sub-call with X-Chain-Token, no payment): admit (the checks before
// payment, then the chain's and the callee's refusals), fund (the chain's payer's rate-limit window), reserve (one
// transaction: the budget taken under the chain row's lock, the payment row, the execution, the escrow, the hold, the
// chain's events), run (the agent, with a token one level deeper), record (the machine; the chain hears CHECK) and answer.
import { SqlClient } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import { sha256 } from "../../layers/x402/payment.js"
import { executionMachine } from "../../machines/execution.js"
import { MachineHost } from "../../machines/Host.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import { Conflict } from "../../src/domain/Errors.js"
import type { ExecuteRequest, ExecutionView } from "../../src/domain/Execution.js"
import type { CallContext, ChainBudgetFunding } from "../../src/domain/Funding.js"
import { newId, newPaymentId } from "../../src/domain/Ids.js"
import { quoteOf } from "../../src/domain/Pricing.js"
import { Circuits } from "../circuits/Circuits.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { budgetPaymentStatement } from "../payments/Repo.js"
import { batch } from "../sql/Batch.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import { AgentCall } from "./AgentCall.js"
import { executionStatements } from "./create.js"
import type { Timing } from "./deadline.js"
import { prepare } from "./prepare.js"
import { type LimitsSeen, RateLimits } from "./RateLimits.js"
import { ExecutionsRepo } from "./Repo.js"
import { requestHashOf } from "./resend.js"
import * as View from "./View.js"

/** A chained call's read-back handle: 256 random bits (docs/chains.md, "Reading a call's result again"). */
export const newReadHandle = () => `chr_${randomBytes(32).toString("base64url")}`

export const chaining = (timing: Timing) => Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const check = yield* prepare
  const rateLimits = yield* RateLimits
  const ledger = yield* Ledger
  const host = yield* MachineHost
  const agentCall = yield* AgentCall
  const circuits = yield* Circuits
  const executions = yield* ExecutionsRepo

  /** `readHandle`: only in the answer that created the call (the service keeps its hash, never the handle). */
  const answer = (id: string, funding: ChainBudgetFunding, readHandle: Option.Option<string>) =>
    Effect.gen(function* () {
      const row = Option.getOrThrow(yield* executions.find(id).pipe(Effect.orDie))
      return { ...View.forClient(row, true), transactionId: row.transactionId, chain: yield* funding.info(readHandle) } satisfies ExecutionView
    })

  /** `limits`: where the paying client's windows are noted once counted (X-RateLimit-* on the answer). */
  return (req: ExecuteRequest, funding: ChainBudgetFunding, limits?: LimitsSeen) =>
    Effect.gen(function* () {
      // 1. Admit: the checks before payment, then the callee's rules and the budget's (the chain's own checks came first).
      const { now, payer } = funding
      const { agent, capability } = yield* check(req)
      const { agentFee, price } = quoteOf(capability, "chain")
      yield* funding.admit(agent, price)
      const requestHash = requestHashOf(req, Option.none())
      const repeat = (existing: { readonly id: string; readonly requestHash: string }) =>
        existing.requestHash === requestHash
          ? answer(existing.id, funding, Option.none())
          : Effect.fail(new Conflict({ code: "IDEMPOTENCY_CONFLICT", message: "this idempotencyKey was used with a different agent, capability or input", details: { requestId: existing.id } }))

      // 2. Fund: sub-calls count against the paying client's window (the chain's payer), like its own calls (a repeat
      // of an idempotent sub-call too, as a paid repeat is).
      yield* rateLimits.admit(agent.id, payer, limits, "reserved")
      if (req.idempotencyKey !== undefined) {
        const existing = yield* executions.findIdempotent(payer, req.idempotencyKey).pipe(Effect.orDie)
        if (Option.isSome(existing)) return yield* repeat(existing.value)
      }

      // 3. Reserve.
      const requestId = newId("req")
      const paymentId = newPaymentId()
      // The call's read-back handle (its "payment header" for GET /execute/:id): random, given once to the caller. It
      // must not be computable from public ids (request and chain ids are public); the chain's payer reads with the root's.
      const readHandle = newReadHandle()
      // Paid from the budget: the payment is settled from the start (the budget is treasury money since the root settled).
      const started = startMachine(executionMachine, { retryWindowMs: timing.retryWindowMs, deadlineMs: timing.deadlineMs, startedAt: now, chained: true })
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
        chain: { chainId: funding.chainId, depth: funding.depth, parentExecutionId: funding.parentExecutionId }
      })
      const hold = yield* ledger.transferStatements({
        kind: "chain_spend",
        movements: [{ debit: Accounts.chainBudgets, credit: Accounts.escrow, amount: price }],
        paymentId,
        agentId: agent.id,
        subjectId: requestId
      }).pipe(Effect.orDie)
      type Reservation = { readonly _tag: "Reserved"; readonly callContext: Effect.Effect<CallContext> } | { readonly _tag: "Repeat"; readonly view: ExecutionView }
      const made = yield* sql.withTransaction(
        Effect.gen(function* () {
          // Lock order: the parent execution (its key, which the new row's foreign key needs) before the chain row, as
          // a failing parent's step does (its row, then the chain's to give its reservation back): no deadlock.
          yield* sql`SELECT 1 FROM executions WHERE id = ${funding.parentExecutionId} FOR KEY SHARE`
          // Refused by the chain row itself (ended, too old, or concurrent calls took the budget): nothing is reserved.
          const reserved = yield* funding.reserve({ requestId, transactionId: created.transactionId, agentId: agent.id, price })
          yield* batch(sql, [
            budgetPaymentStatement(sql, {
              paymentId,
              requestId,
              chainId: funding.chainId,
              amount: price,
              nonce: `0x${randomBytes(32).toString("hex")}`,
              handleSha256: sha256(readHandle),
              now
            }),
            ...created.statements,
            ...hold.statements,
            ...reserved.statements
          ])
          return { _tag: "Reserved", callContext: reserved.callContext } satisfies Reservation
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

      // 4. Run: the callee hires in turn with a token one level deeper.
      const outcome = yield* agentCall.call({ id: requestId, input: req.input }, agent, capability, yield* made.callContext)

      // 5. Record: the execution's machine, the circuit, and the chain hears that something in it answered.
      yield* host.deliverNow("execution", requestId, outcome.event).pipe(Effect.orDie)
      yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
      yield* Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (at) => host.deliverNow("chain", funding.chainId, { type: "CHECK", at })).pipe(Effect.orDie)

      // 6. Answer.
      return yield* answer(requestId, funding, Option.some(readHandle))
    }).pipe(withSpan("Executions.chained"))
})
