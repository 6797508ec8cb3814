// The rows a new execution starts with, as statements for the caller's one-statement batch: the execution with its
// machine snapshot, its escrow, its first transitions and its durable timers (paid and chained executions alike).
import type { SqlClient } from "@effect/sql"
import { type executionMachine, executionStatus } from "../../machines/execution.js"
import { historyStatement, scheduleStatement } from "../../machines/runner.js"
import { actionsOf, type Step } from "../../machines/step.js"
import { newEscrowId, newTransactionId } from "../../src/domain/Ids.js"
import { canonicalJson } from "../../src/domain/Json.js"
import { EXECUTION_PLATFORM_FEE, splitAgentFee } from "../../src/domain/Money.js"
import { priceOf } from "../../src/domain/Pricing.js"

export interface NewExecution {
  readonly requestId: string
  readonly paymentId: string
  readonly payer: string
  readonly agentId: string
  readonly capabilityId: string
  readonly input: unknown
  readonly requestHash: string
  readonly idempotencyKey: string | undefined
  readonly mode: "sync" | "async" | "callback"
  readonly callbackUrl: string | undefined
  readonly agentFee: bigint
  readonly start: Step<typeof executionMachine>
  readonly now: number
  /** A metered call's columns (services/executions/metering.ts `meteredColumns`); none for flat pricing. */
  readonly metered?: Readonly<Record<string, string | null>>
  /** Inside a chain: the chain, this call's depth (0 for the root) and the execution whose agent made the call. */
  readonly chain?: { readonly chainId: string; readonly depth: number; readonly parentExecutionId: string | null }
}

/** Deterministic JSON (sorted keys) so the same request always hashes the same. */
export const canonical = canonicalJson

/** A request's idempotency key: the body's `idempotencyKey`, else the payer's x402 v2 payment-identifier (docs/clients.md). */
export const idempotencyKeyOf = (bodyKey: string | undefined, paymentIdentifier: string | undefined): string | undefined =>
  bodyKey ?? (paymentIdentifier === undefined ? undefined : `x402-payment-identifier:${paymentIdentifier}`)

export const executionStatements = (sql: SqlClient.SqlClient, e: NewExecution) => {
  const escrowId = newEscrowId()
  const transactionId = newTransactionId()
  const price = priceOf(e.agentFee)
  const { agentEarnings, platformCut } = splitAgentFee(e.agentFee)
  return {
    escrowId,
    transactionId,
    price,
    statements: [
      sql`INSERT INTO executions ${sql.insert({
        id: e.requestId,
        transactionId,
        escrowId,
        paymentId: e.paymentId,
        payer: e.payer,
        agentId: e.agentId,
        capabilityId: e.capabilityId,
        input: JSON.stringify(e.input),
        requestHash: e.requestHash,
        idempotencyKey: e.idempotencyKey ?? null,
        mode: e.mode,
        callbackUrl: e.callbackUrl ?? null,
        status: executionStatus(e.start.state, e.start.snapshot.context),
        state: e.start.state,
        machineSnapshot: JSON.stringify(e.start.persisted),
        price: price.toString(),
        platformFee: EXECUTION_PLATFORM_FEE.toString(),
        agentFee: e.agentFee.toString(),
        platformCut: platformCut.toString(),
        agentEarnings: agentEarnings.toString(),
        depth: e.chain?.depth ?? 0,
        chainId: e.chain?.chainId ?? null,
        parentExecutionId: e.chain?.parentExecutionId ?? null,
        ...e.metered,
        createdAt: new Date(e.now),
        updatedAt: new Date(e.now)
      })}`,
      sql`INSERT INTO escrows ${sql.insert({ id: escrowId, executionId: e.requestId, agentId: e.agentId, amount: price.toString(), status: "held" })}`,
      ...actionsOf(e.start, "scheduleTimer").map((timer) => scheduleStatement(sql, "execution", e.requestId, { type: timer.event, at: timer.at })),
      historyStatement(sql, [{ machine: "execution", actorId: e.requestId, event: { type: "CREATED" }, from: null, to: e.start.state, at: e.now }])
    ]
  }
}
