// Disputes: the payer of a completed, paid execution contests it within 24 hours (its X-Client-Id proves it paid); the
// money is frozen at once, the agent responds (wallet signature), both add evidence, and the platform resolves it.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { disputeMachine, type Resolution } from "../../machines/dispute.js"
import { MachineHost } from "../../machines/Host.js"
import { historyStatement, scheduleStatement } from "../../machines/runner.js"
import { startMachine } from "../../machines/step.js"
import { BadRequest, Conflict, Forbidden, NotFound, RateLimited, Unauthorized } from "../../src/domain/Errors.js"
import { AgentId, newId } from "../../src/domain/Ids.js"
import { Agents } from "../agents/Agents.js"
import { consumeWalletSignature, verifyWalletSignature, type WalletAuthHeaders } from "../agents/WalletAuth.js"
import { Outbox } from "../outbox/Outbox.js"
import { ClientIds } from "./ClientIds.js"
import { shareOf } from "./money.js"
import { type DisputeRow, DisputesRepo, type DisputeStatus, type EvidenceRow } from "./Repo.js"

/** Spec limits (section 8); the rate rule's window and free disputes are ours (docs/decisions/disputes.md). */
export const DISPUTE_WINDOW_MS = 24 * 60 * 60 * 1000
export const RESPONSE_TIME_MS = 48 * 60 * 60 * 1000
export const MONTHLY_DISPUTES = 10
export const EVIDENCE_PER_PARTY = 10
export const RATE_WINDOW_DAYS = 90
/** A client's first disputes are always heard; from the third on, disputes may not exceed 20% of its paid transactions. */
export const RATE_FREE_DISPUTES = 2

export interface OpenRequest {
  readonly transactionId: string
  readonly reason: DisputeRow["reason"]
  readonly evidence?: string | undefined
}
export interface EvidenceRequest {
  readonly evidenceType: EvidenceRow["evidenceType"]
  readonly content: string
  readonly metadata?: { readonly [key: string]: unknown } | undefined
}
export type EvidenceHeaders = WalletAuthHeaders & { readonly "x-client-id"?: string | undefined }


export class Disputes extends Effect.Service<Disputes>()("disputes/Disputes", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* DisputesRepo
    const host = yield* MachineHost
    const agents = yield* Agents
    const outbox = yield* Outbox
    const clientIds = yield* ClientIds

    const notFound = (id: string) => new NotFound({ code: "DISPUTE_NOT_FOUND", message: `no dispute ${id}` })
    const closed = (row: DisputeRow) =>
      new Conflict({ code: "DISPUTE_CLOSED", message: `the dispute is ${row.status}`, details: { status: row.status } })
    const isClosed = (row: DisputeRow) => row.status !== "open" && row.status !== "escalated"

    const payerOf = (header: string | undefined) =>
      Option.match(clientIds.verify(header), {
        onNone: () =>
          Effect.fail(new Unauthorized({
            code: "CLIENT_ID_REQUIRED",
            message: "X-Client-Id is missing or not one this marketplace issued (it comes with the paid execution's response)"
          })),
        onSome: Effect.succeed
      })

    const get = (id: string) => Effect.flatMap(repo.find(id), Option.match({ onNone: () => Effect.fail(notFound(id)), onSome: Effect.succeed }))

    /** Files a dispute: checks who and when, then freezes the money and arms the 48-hour timer, in one transaction. */
    const open = (req: OpenRequest, clientIdHeader: string | undefined) =>
      Effect.gen(function* () {
        const payer = yield* payerOf(clientIdHeader)
        const [tx] = yield* sql<{ id: string; transactionId: string; escrowId: string; agentId: string; payer: string; price: string; agentEarnings: string; createdAt: Date }>`
          SELECT id, transaction_id, escrow_id, agent_id, payer, price::text AS price, agent_earnings::text AS agent_earnings, created_at
          FROM executions WHERE transaction_id = ${req.transactionId} OR id = ${req.transactionId}`
        if (tx === undefined) return yield* new NotFound({ code: "TRANSACTION_NOT_FOUND", message: `no transaction ${req.transactionId}` })
        if (tx.payer.toLowerCase() !== payer) {
          return yield* new Forbidden({ code: "NOT_TRANSACTION_PAYER", message: "only the wallet that paid for the transaction may dispute it" })
        }
        const now = yield* Clock.currentTimeMillis
        if (now - tx.createdAt.getTime() > DISPUTE_WINDOW_MS) {
          return yield* new Conflict({
            code: "DISPUTE_WINDOW_CLOSED",
            message: "disputes must be filed within 24 hours of the transaction",
            details: { transactionAt: tx.createdAt.toISOString(), closedAt: new Date(tx.createdAt.getTime() + DISPUTE_WINDOW_MS).toISOString() }
          })
        }
        const refuseDuplicate = Effect.flatMap(repo.findByExecution(tx.id), (existing) =>
          Option.isSome(existing)
            ? Effect.fail(new Conflict({ code: "DISPUTE_EXISTS", message: "the transaction already has a dispute", details: { disputeId: existing.value.id } }))
            : Effect.void)
        yield* refuseDuplicate
        const id = newId("dsp")
        const respondBy = now + RESPONSE_TIME_MS
        const started = startMachine(disputeMachine, { respondBy })
        yield* sql.withTransaction(
          Effect.gen(function* () {
            // One client's filings are counted one at a time: ten concurrent requests cannot all pass the limits.
            yield* sql`SELECT pg_advisory_xact_lock(hashtextextended(${`dispute-client:${payer}`}, 0))`
            // A duplicate that waited for the lock is a duplicate, not a breach of the limits.
            yield* refuseDuplicate
            yield* checkLimits(payer, now)
            yield* sql`INSERT INTO disputes ${sql.insert({
              id,
              executionId: tx.id,
              transactionId: tx.transactionId,
              escrowId: tx.escrowId,
              agentId: tx.agentId,
              clientWallet: payer,
              reason: req.reason,
              clientEvidence: req.evidence ?? null,
              status: "open",
              machineSnapshot: JSON.stringify(started.persisted),
              amount: tx.price,
              agentAmount: tx.agentEarnings,
              respondBy: new Date(respondBy),
              createdAt: new Date(now),
              updatedAt: new Date(now)
            })}`
            const frozen = yield* host.deliver("execution", tx.id, { type: "DISPUTE_OPENED", at: now, disputeId: id })
            if (Option.isNone(frozen) || !frozen.value.changed) {
              return yield* new Conflict({
                code: "TRANSACTION_NOT_DISPUTABLE",
                message: "only a completed execution whose payment settled can be disputed; failed ones are refunded on their own",
                details: { executionState: Option.match(frozen, { onNone: () => "unknown", onSome: (d) => d.state }) }
              })
            }
            yield* scheduleStatement(sql, "dispute", id, { type: "RESPONSE_DUE", at: respondBy })
            yield* historyStatement(sql, [{ machine: "dispute", actorId: id, event: { type: "OPENED" }, from: null, to: "open", at: now }])
            yield* repo.addTimeline(id, "opened", "client", { transactionId: tx.transactionId, reason: req.reason, hasEvidence: req.evidence !== undefined }, now)
            yield* outbox.emit("dispute.opened", tx.agentId, {
              disputeId: id,
              transactionId: tx.transactionId,
              reason: req.reason,
              respondBy: new Date(respondBy).toISOString()
            })
          })
        ).pipe(
          // A concurrent duplicate lost the race on the one-dispute-per-execution index.
          Effect.catchIf(
            (e) => e._tag === "SqlError" && /disputes_execution_id_key/.test(String(e.cause)),
            () => new Conflict({ code: "DISPUTE_EXISTS", message: "the transaction already has a dispute" })
          )
        )
        return yield* get(id)
      }).pipe(Effect.catchTag("SqlError", Effect.die), Effect.withSpan("Disputes.open"))

    /** 10 per calendar month (UTC); above RATE_FREE_DISPUTES, at most 20% of the paid transactions of the last 90 days. */
    const checkLimits = (payer: string, now: number) =>
      Effect.gen(function* () {
        const monthStart = new Date(now)
        monthStart.setUTCDate(1)
        monthStart.setUTCHours(0, 0, 0, 0)
        const since = new Date(now - RATE_WINDOW_DAYS * 24 * 60 * 60 * 1000)
        const [counts] = yield* sql<{ thisMonth: number; recent: number; paid: number }>`
          SELECT (SELECT COUNT(*) FROM disputes WHERE client_wallet = ${payer} AND created_at >= ${monthStart})::int AS this_month,
                 (SELECT COUNT(*) FROM disputes WHERE client_wallet = ${payer} AND created_at >= ${since})::int AS recent,
                 (SELECT COUNT(*) FROM executions e JOIN payments p ON p.id = e.payment_id
                   WHERE e.payer = ${payer} AND e.created_at >= ${since} AND p.status = 'settled')::int AS paid`
        const { thisMonth, recent, paid } = counts ?? { thisMonth: 0, recent: 0, paid: 0 }
        if (thisMonth >= MONTHLY_DISPUTES) {
          return yield* new RateLimited({
            code: "DISPUTE_LIMIT_REACHED",
            message: `at most ${MONTHLY_DISPUTES} disputes per calendar month (UTC)`,
            details: { limit: MONTHLY_DISPUTES, used: thisMonth }
          })
        }
        const filed = recent + 1
        if (filed > RATE_FREE_DISPUTES && filed * 5 > paid) {
          return yield* new Forbidden({
            code: "DISPUTE_RATE_EXCEEDED",
            message: "disputes may not exceed 20% of the client's paid transactions",
            details: { disputes: filed, paidTransactions: paid, windowDays: RATE_WINDOW_DAYS }
          })
        }
      })

    /** The disputed agent's answer (its owner's single-use wallet signature); it stops the 48-hour escalation. */
    const respond = (id: string, response: string, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const dispute = yield* get(id)
        const proof = yield* verifyAgent(dispute, auth)
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* consumeWalletSignature(proof)
            const row = Option.getOrThrow(yield* repo.lock(id))
            if (isClosed(row)) return yield* closed(row)
            if (row.agentResponse !== null) {
              return yield* new Conflict({ code: "DISPUTE_ALREADY_RESPONDED", message: "the agent already responded; add more as evidence" })
            }
            const now = yield* Clock.currentTimeMillis
            yield* sql`UPDATE disputes SET agent_response = ${response}, responded_at = ${new Date(now)}, updated_at = ${new Date(now)} WHERE id = ${id}`
            yield* host.deliver("dispute", id, { type: "AGENT_RESPONDED", at: now })
            yield* repo.addTimeline(id, "evidence_submitted", "agent", { kind: "response", length: response.length }, now)
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        return { disputeId: id, message: "Response recorded; the platform will review the dispute." }
      }).pipe(Effect.catchTag("SqlError", Effect.die), Effect.withSpan("Disputes.respond"))

    const verifyAgent = (dispute: DisputeRow, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const agent = yield* agents.loadRecord(AgentId.make(dispute.agentId))
        if (Option.isNone(agent)) return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${dispute.agentId} not found` })
        return yield* verifyWalletSignature(agent.value, auth)
      })

    /** Evidence from the agent (wallet signature) or the client (its X-Client-Id), at most 10 per party. */
    const addEvidence = (id: string, req: EvidenceRequest, headers: EvidenceHeaders) =>
      Effect.gen(function* () {
        const dispute = yield* get(id)
        const asAgent = headers["x-agent-signature"] !== undefined || headers["x-agent-wallet"] !== undefined
        const proof = asAgent ? Option.some(yield* verifyAgent(dispute, headers)) : Option.none()
        if (!asAgent) {
          const payer = yield* payerOf(headers["x-client-id"])
          if (payer !== dispute.clientWallet) {
            return yield* new Forbidden({ code: "NOT_TRANSACTION_PAYER", message: "only the client that filed the dispute may add evidence as client" })
          }
        }
        const party = asAgent ? "agent" as const : "client" as const
        if (req.evidenceType !== "text" && !/^https?:\/\/\S+$/.test(req.content)) {
          return yield* new BadRequest({
            code: "VALIDATION_ERROR",
            message: "validation failed",
            details: { issues: [{ path: "content", message: `a ${req.evidenceType} item is an http(s) URL` }] }
          })
        }
        const evidenceId = yield* sql.withTransaction(
          Effect.gen(function* () {
            if (Option.isSome(proof)) yield* consumeWalletSignature(proof.value)
            const row = Option.getOrThrow(yield* repo.lock(id))
            if (isClosed(row)) return yield* closed(row)
            if ((yield* repo.evidenceCount(id, party)) >= EVIDENCE_PER_PARTY) {
              return yield* new Conflict({ code: "EVIDENCE_LIMIT_REACHED", message: `at most ${EVIDENCE_PER_PARTY} evidence items per party`, details: { limit: EVIDENCE_PER_PARTY } })
            }
            const now = yield* Clock.currentTimeMillis
            const evidenceId = yield* repo.addEvidence({
              disputeId: id,
              submittedBy: party,
              evidenceType: req.evidenceType,
              content: req.content,
              metadata: req.metadata ?? null,
              createdAt: new Date(now)
            })
            yield* repo.addTimeline(id, "evidence_submitted", party, { evidenceId, evidenceType: req.evidenceType }, now)
            yield* sql`UPDATE disputes SET updated_at = ${new Date(now)} WHERE id = ${id}`
            return evidenceId
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        return { evidenceId, disputeId: id, submittedBy: party, evidenceType: req.evidenceType, message: "Evidence recorded." }
      }).pipe(Effect.catchTag("SqlError", Effect.die), Effect.withSpan("Disputes.addEvidence"))

    /** The platform's decision. A split gives the client `clientShareBps` of the price (default half). Only once. */
    const resolve = (id: string, resolution: Resolution, notes: string, clientShareBps: number | undefined, by: string) =>
      Effect.gen(function* () {
        const dispute = yield* get(id)
        const clientShare = resolution === "resolved_agent" ? 0n
          : resolution === "resolved_client" ? dispute.amount
          : shareOf(dispute.amount, clientShareBps ?? 5_000)
        if (resolution === "resolved_split" && (clientShare <= 0n || clientShare >= dispute.amount)) {
          return yield* new BadRequest({
            code: "VALIDATION_ERROR",
            message: "validation failed",
            details: { issues: [{ path: "clientShareBps", message: "a split must give each side a part of the price" }] }
          })
        }
        const now = yield* Clock.currentTimeMillis
        const delivered = yield* host.deliverNow("dispute", id, { type: "RESOLVE", at: now, resolution, clientShare: clientShare.toString(), notes, by })
          .pipe(Effect.catchTag("SqlError", Effect.die))
        if (Option.isNone(delivered)) return yield* notFound(id)
        if (!delivered.value.changed) return yield* closed(yield* get(id))
        return yield* get(id)
      }).pipe(Effect.catchTag("SqlError", Effect.die), Effect.withSpan("Disputes.resolve"))

    const byAgent = (agentId: string, status: DisputeStatus | undefined, limit: number, offset: number) =>
      Effect.all({ rows: repo.listByAgent(agentId, status, limit, offset), summary: repo.summary(agentId) }).pipe(Effect.catchTag("SqlError", Effect.die))

    const evidence = (id: string) => Effect.zipRight(get(id), repo.evidence(id)).pipe(Effect.catchTag("SqlError", Effect.die))
    const timeline = (id: string) => Effect.zipRight(get(id), repo.timeline(id)).pipe(Effect.catchTag("SqlError", Effect.die))
    const list = (status: DisputeStatus | undefined, limit: number, offset: number) =>
      repo.listByStatus(status, limit, offset).pipe(Effect.catchTag("SqlError", Effect.die))

    return {
      open,
      respond,
      addEvidence,
      resolve,
      get: (id: string) => get(id).pipe(Effect.catchTag("SqlError", Effect.die)),
      byAgent,
      evidence,
      timeline,
      list,
      /** What a view shows for the client: its id's public handle, never the id (a bearer credential). */
      clientHandleOf: (row: DisputeRow) => clientIds.handle(row.clientWallet)
    } as const
  }),
  dependencies: [DisputesRepo.Default, Agents.Default, Outbox.Default, ClientIds.Default, MachineHost.Default]
}) {}
