// An agent's payment history (spec: GET /payments/history/:agentId): its transactions in the list view, newest first,
// for its owner only (wallet signature; a read, so reusable within its 5 minutes). The transactions are those the agent
// provided and those it requested: the agents it hired inside chains (requesting_agent is then the agent itself).
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { NotFound } from "../../src/domain/Errors.js"
import type { AgentId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Agents } from "../agents/Agents.js"
import { verifyWalletSignature, type WalletAuthHeaders } from "../agents/WalletAuth.js"

const HistoryRow = Schema.Struct({
  transactionId: Schema.String,
  /** The agent whose chained call hired the provider (the parent execution's agent); null when a client paid. */
  requestingAgent: Schema.NullOr(Schema.String),
  agentId: Schema.String,
  capabilityId: Schema.String,
  status: Schema.String,
  price: Schema.BigInt,
  platformCut: Schema.BigInt,
  agentEarnings: Schema.BigInt,
  executionTimeMs: Schema.NullOr(Schema.Number),
  escrowId: Schema.String,
  network: Schema.String,
  createdAt: Schema.DateFromSelf
})
const decodeRows = Schema.decodeUnknown(Schema.Array(HistoryRow))

/** The spec's list view of a Transaction (no gross_amount, platform_revenue, dispute_id or completed_at). */
export const toListView = (row: typeof HistoryRow.Type) => ({
  id: row.transactionId,
  requesting_agent: row.requestingAgent,
  providing_agent: row.agentId,
  capability_id: row.capabilityId,
  amount: formatUsdc(row.price),
  platformCut: formatUsdc(row.platformCut),
  agent_earnings: formatUsdc(row.agentEarnings),
  status: row.status,
  execution_time: row.executionTimeMs,
  escrow_id: row.escrowId,
  network: row.network,
  created_at: row.createdAt.toISOString()
})

export class History extends Effect.Service<History>()("ledger/History", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const agents = yield* Agents

    /**
     * One page of both sides, newest first: each side is read from its own index (executions_agent for what the agent
     * provided; its executions, then their children by executions_parent, for what it hired) and cut to the page's end
     * before they are merged. An agent never hires itself (a chain refuses a cycle), so no transaction is on both sides.
     */
    const page = (agentId: AgentId, limit: number, offset: number) => {
      const end = limit + offset
      const columns = sql`x.transaction_id, x.agent_id, x.capability_id, x.status, x.price, x.platform_cut, x.agent_earnings,
                          x.execution_time_ms, x.escrow_id, x.created_at,
                          (SELECT py.network FROM payments py WHERE py.id = x.payment_id) AS network`
      return sql`
        SELECT * FROM (
          (SELECT ${columns}, p.agent_id AS requesting_agent
           FROM executions x LEFT JOIN executions p ON p.id = x.parent_execution_id
           WHERE x.agent_id = ${agentId} ORDER BY x.created_at DESC, x.transaction_id LIMIT ${end})
          UNION ALL
          (SELECT ${columns}, p.agent_id AS requesting_agent
           FROM executions p JOIN executions x ON x.parent_execution_id = p.id
           WHERE p.agent_id = ${agentId} AND x.agent_id <> ${agentId} ORDER BY x.created_at DESC, x.transaction_id LIMIT ${end})
        ) t ORDER BY created_at DESC, transaction_id LIMIT ${limit} OFFSET ${offset}`
    }

    const history = (agentId: AgentId, auth: WalletAuthHeaders, limit: number, offset: number) =>
      Effect.gen(function* () {
        const record = yield* agents.loadRecord(agentId)
        if (Option.isNone(record) || record.value.status === "pending") {
          return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
        }
        yield* verifyWalletSignature(record.value, auth)
        const rows = yield* page(agentId, limit, offset).pipe(Effect.catchTag("SqlError", Effect.die))
        return (yield* Effect.orDie(decodeRows(rows))).map(toListView)
      }).pipe(Effect.withSpan("History.history"))

    return { history } as const
  }),
  dependencies: [Agents.Default]
}) {}
