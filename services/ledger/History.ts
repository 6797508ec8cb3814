// An agent's payment history (spec: GET /payments/history/:agentId): its transactions in the list view, newest first,
// for its owner only (wallet signature; a read, so reusable within its 5 minutes).
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { NotFound } from "../../src/domain/Errors.js"
import type { AgentId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Agents } from "../agents/Agents.js"
import { verifyWalletSignature, type WalletAuthHeaders } from "../agents/WalletAuth.js"

const HistoryRow = Schema.Struct({
  transactionId: Schema.String,
  agentId: Schema.String,
  capabilityId: Schema.String,
  status: Schema.String,
  price: Schema.BigInt,
  platformCut: Schema.BigInt,
  agentEarnings: Schema.BigInt,
  executionTimeMs: Schema.NullOr(Schema.Number),
  escrowId: Schema.String,
  createdAt: Schema.DateFromSelf
})
const decodeRows = Schema.decodeUnknown(Schema.Array(HistoryRow))

/** The spec's list view of a Transaction (no gross_amount, platform_revenue, dispute_id or completed_at). */
export const toListView = (row: typeof HistoryRow.Type) => ({
  id: row.transactionId,
  requesting_agent: null,
  providing_agent: row.agentId,
  capability_id: row.capabilityId,
  amount: formatUsdc(row.price),
  platformCut: formatUsdc(row.platformCut),
  agent_earnings: formatUsdc(row.agentEarnings),
  status: row.status,
  execution_time: row.executionTimeMs,
  escrow_id: row.escrowId,
  created_at: row.createdAt.toISOString()
})

export class History extends Effect.Service<History>()("ledger/History", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const agents = yield* Agents

    const history = (agentId: AgentId, auth: WalletAuthHeaders, limit: number, offset: number) =>
      Effect.gen(function* () {
        const record = yield* agents.loadRecord(agentId)
        if (Option.isNone(record) || record.value.status === "pending") {
          return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
        }
        yield* verifyWalletSignature(record.value, auth)
        const rows = yield* sql`SELECT transaction_id, agent_id, capability_id, status, price, platform_cut, agent_earnings, execution_time_ms, escrow_id, created_at
                FROM executions WHERE agent_id = ${agentId} ORDER BY created_at DESC, id LIMIT ${limit} OFFSET ${offset}`.pipe(
          Effect.catchTag("SqlError", Effect.die)
        )
        return (yield* Effect.orDie(decodeRows(rows))).map(toListView)
      }).pipe(Effect.withSpan("History.history"))

    return { history } as const
  }),
  dependencies: [Agents.Default]
}) {}
