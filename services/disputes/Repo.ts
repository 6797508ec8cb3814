// Disputes in PostgreSQL: the row (with its machine snapshot), locks, lists with their summary, evidence and timeline.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { rowsOf } from "../sql/Rows.js"

export const DisputeStatus = Schema.Literal("open", "escalated", "resolved_agent", "resolved_client", "resolved_split")
export type DisputeStatus = typeof DisputeStatus.Type

export const DisputeRow = Schema.Struct({
  id: Schema.String,
  executionId: Schema.String,
  transactionId: Schema.String,
  escrowId: Schema.String,
  agentId: Schema.String,
  clientWallet: Schema.String,
  reason: Schema.Literal("quality", "non_delivery", "overcharge"),
  clientEvidence: Schema.NullOr(Schema.String),
  agentResponse: Schema.NullOr(Schema.String),
  respondedAt: Schema.NullOr(Schema.DateFromSelf),
  status: DisputeStatus,
  machineSnapshot: Schema.Unknown,
  amount: Schema.BigInt,
  agentAmount: Schema.BigInt,
  debt: Schema.BigInt,
  clientRefund: Schema.NullOr(Schema.BigInt),
  respondBy: Schema.DateFromSelf,
  resolutionNotes: Schema.NullOr(Schema.String),
  resolvedBy: Schema.NullOr(Schema.String),
  escalatedAt: Schema.NullOr(Schema.DateFromSelf),
  escalationReason: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf,
  resolvedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type DisputeRow = typeof DisputeRow.Type

export const EvidenceRow = Schema.Struct({
  id: Schema.String,
  disputeId: Schema.String,
  submittedBy: Schema.Literal("agent", "client"),
  evidenceType: Schema.Literal("text", "url", "screenshot"),
  content: Schema.String,
  metadata: Schema.NullOr(Schema.Unknown),
  createdAt: Schema.DateFromSelf
})
export type EvidenceRow = typeof EvidenceRow.Type

export const TimelineRow = Schema.Struct({
  id: Schema.String,
  eventType: Schema.Literal("opened", "evidence_submitted", "escalated", "resolved"),
  actor: Schema.String,
  details: Schema.Unknown,
  createdAt: Schema.DateFromSelf
})
export type TimelineRow = typeof TimelineRow.Type

export interface DisputeSummary {
  readonly total: number
  readonly open: number
  readonly won: number
  readonly lost: number
}

const disputes = rowsOf(DisputeRow)
const evidenceRows = rowsOf(EvidenceRow)
const timelineRows = rowsOf(TimelineRow)

export class DisputesRepo extends Effect.Service<DisputesRepo>()("disputes/Repo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const first = <A>(r: ReadonlyArray<A>) => Option.fromNullable(r[0])

    const find = (id: string) => Effect.map(disputes(sql`SELECT * FROM disputes WHERE id = ${id}`), first)
    const lock = (id: string) => Effect.map(disputes(sql`SELECT * FROM disputes WHERE id = ${id} FOR UPDATE`), first)
    const findByExecution = (executionId: string) =>
      Effect.map(disputes(sql`SELECT * FROM disputes WHERE execution_id = ${executionId}`), first)

    const listByAgent = (agentId: string, status: DisputeStatus | undefined, limit: number, offset: number) =>
      disputes(sql`SELECT * FROM disputes WHERE agent_id = ${agentId} ${status === undefined ? sql`` : sql`AND status = ${status}`}
                   ORDER BY created_at DESC, id LIMIT ${limit} OFFSET ${offset}`)

    /** From the agent's side: won = resolved for the agent, lost = resolved for the client; open counts escalated ones. */
    const summary = (agentId: string) =>
      Effect.map(
        sql<{ total: number; open: number; won: number; lost: number }>`
          SELECT COUNT(*)::int AS total,
                 COUNT(*) FILTER (WHERE status IN ('open', 'escalated'))::int AS open,
                 COUNT(*) FILTER (WHERE status = 'resolved_agent')::int AS won,
                 COUNT(*) FILTER (WHERE status = 'resolved_client')::int AS lost
          FROM disputes WHERE agent_id = ${agentId}`,
        (rows): DisputeSummary => rows[0] ?? { total: 0, open: 0, won: 0, lost: 0 }
      )

    const listByStatus = (status: DisputeStatus | undefined, limit: number, offset: number) =>
      Effect.all({
        rows: disputes(sql`SELECT * FROM disputes ${status === undefined ? sql`` : sql`WHERE status = ${status}`}
                           ORDER BY created_at, id LIMIT ${limit} OFFSET ${offset}`),
        total: Effect.map(
          sql<{ total: number }>`SELECT COUNT(*)::int AS total FROM disputes ${status === undefined ? sql`` : sql`WHERE status = ${status}`}`,
          (rows) => rows[0]?.total ?? 0
        )
      })

    const evidence = (disputeId: string) =>
      evidenceRows(sql`SELECT * FROM dispute_evidence WHERE dispute_id = ${disputeId} ORDER BY seq`)
    const evidenceCount = (disputeId: string, party: "agent" | "client") =>
      Effect.map(
        sql<{ n: number }>`SELECT COUNT(*)::int AS n FROM dispute_evidence WHERE dispute_id = ${disputeId} AND submitted_by = ${party}`,
        (rows) => rows[0]?.n ?? 0
      )
    const addEvidence = (row: Omit<EvidenceRow, "id">) =>
      Effect.gen(function* () {
        const id = newId("evt")
        yield* sql`INSERT INTO dispute_evidence ${sql.insert({
          id,
          disputeId: row.disputeId,
          submittedBy: row.submittedBy,
          evidenceType: row.evidenceType,
          content: row.content,
          metadata: row.metadata === null ? null : JSON.stringify(row.metadata),
          createdAt: row.createdAt
        })}`
        return id
      })

    const timeline = (disputeId: string) =>
      timelineRows(sql`SELECT id, event_type, actor, details, created_at FROM dispute_timeline WHERE dispute_id = ${disputeId} ORDER BY seq`)
    const addTimeline = (disputeId: string, eventType: TimelineRow["eventType"], actor: string, details: Record<string, unknown>, at: number) =>
      sql`INSERT INTO dispute_timeline ${sql.insert({
        id: newId("tle"),
        disputeId,
        eventType,
        actor,
        details: JSON.stringify(details),
        createdAt: new Date(at)
      })}`.pipe(Effect.asVoid)

    return { find, lock, findByExecution, listByAgent, summary, listByStatus, evidence, evidenceCount, addEvidence, timeline, addTimeline } as const
  })
}) {}

/** What a dispute's freeze took back from an agent that had already withdrawn its earnings (the execution's step records it). */
export const debtStatement = (sql: SqlClient.SqlClient, disputeId: string, debt: bigint) =>
  sql`UPDATE disputes SET debt = ${debt.toString()} WHERE id = ${disputeId}`

/** The debt its freeze recorded (0 when none), for the resolution's movements. */
export const debtOf = (sql: SqlClient.SqlClient, disputeId: string) =>
  Effect.map(sql<{ debt: string }>`SELECT debt::text AS debt FROM disputes WHERE id = ${disputeId}`, (rows) => BigInt(rows[0]?.debt ?? "0"))
