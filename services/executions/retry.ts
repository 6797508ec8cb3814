// A retry of a failed or timed-out execution on its original payment (authorised by the same payment header): the
// machine takes RETRY, the agent is called again, and the outcome is recorded like a first attempt's.
import { SqlClient } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Clock, Effect, Fiber, Option, type Scope } from "effect"
import { holdsPayment } from "../../layers/x402/credential.js"
import { MachineHost } from "../../machines/Host.js"
import type { AgentRecord } from "../../src/domain/Agent.js"
import { Conflict, Forbidden, NotFound } from "../../src/domain/Errors.js"
import { Agents } from "../agents/Agents.js"
import { Circuits } from "../circuits/Circuits.js"
import { sqlErrorsAsDefects } from "../sql/SqlErrors.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { AgentCall } from "./AgentCall.js"
import { Metering } from "./metering.js"
import { ExecutionsRepo } from "./Repo.js"
import * as View from "./View.js"

/** `scope`: where the attempt runs (it outlives a client that hangs up). */
export const retrying = (scope: Scope.Scope) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ExecutionsRepo
    const agents = yield* Agents
    const circuits = yield* Circuits
    const host = yield* MachineHost
    const agentCall = yield* AgentCall
    const metering = yield* Metering
    const load = (id: string) => repo.find(id).pipe(Effect.orDie)

    return (id: string, proofs: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const found = yield* load(id)
        if (Option.isNone(found)) return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${id}` })
        const row = found.value
        if (!holdsPayment(proofs, row.headerSha256)) {
          return yield* new Forbidden({ code: "RETRY_NOT_AUTHORIZED", message: "send the payment header of the original execution (its X-PAYMENT-USED value)" })
        }
        // An upto authorization pays one attempt: a failed call voided it (nothing settled), so there is nothing to
        // retry on; the payer signs a new one (docs/clients.md "Paying metered calls with upto").
        if (row.paymentPurpose === "upto") {
          return yield* new Conflict({
            code: "EXECUTION_NOT_RETRYABLE",
            message: "a call paid with upto is not retried on its authorization: send the call again with a new one",
            details: { status: row.status }
          })
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
          yield* UnitOfWork.transaction(sql)(Effect.zipRight(metering.charge(row.id, outcome, row.settlementState === "settled"), host.deliver("execution", row.id, outcome.event)))
          yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
        }).pipe(Effect.catchAllCause((cause) => Effect.logError(`retry of ${id} failed`, cause)))
        yield* Fiber.join(yield* Effect.forkIn(attempt, scope))
        return View.forClient(Option.getOrThrow(yield* load(id)), true)
      }).pipe(sqlErrorsAsDefects, withSpan("Executions.retry"))
  })
