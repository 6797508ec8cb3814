// Transactions by requester or by provider (spec section 4, Other: paths ours, docs/decisions/operators-and-console.md): newest first, keyset
// pages. A requester is the paying wallet, or an agent that hired others inside chains (its sub-calls' requesting agent).
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { formatUsdc } from "../../src/domain/Money.js"
import { rowsOf } from "../sql/Rows.js"
import { decodeTimeCursor, page } from "./cursor.js"

const TxRow = Schema.Struct({
  id: Schema.String,
  transactionId: Schema.String,
  payer: Schema.String,
  requestingAgent: Schema.NullOr(Schema.String),
  agentId: Schema.String,
  capabilityId: Schema.String,
  status: Schema.String,
  price: Schema.BigInt,
  platformFee: Schema.BigInt,
  platformCut: Schema.BigInt,
  agentEarnings: Schema.BigInt,
  executionTimeMs: Schema.NullOr(Schema.Number),
  escrowId: Schema.String,
  escrowStatus: Schema.String,
  chainId: Schema.NullOr(Schema.String),
  network: Schema.String,
  createdAt: Schema.DateFromSelf,
  createdKey: Schema.String
})
type TxRow = typeof TxRow.Type
const txRows = rowsOf(TxRow)

/** The spec's Transaction list view, with what operators also need: the payer, the request, the fee and the escrow's state. */
const view = (row: TxRow) => ({
  id: row.transactionId,
  requestId: row.id,
  requesting_agent: row.requestingAgent,
  payer: row.payer,
  providing_agent: row.agentId,
  capability_id: row.capabilityId,
  amount: formatUsdc(row.price),
  platformFee: formatUsdc(row.platformFee),
  platformCut: formatUsdc(row.platformCut),
  agent_earnings: formatUsdc(row.agentEarnings),
  status: row.status,
  execution_time: row.executionTimeMs,
  escrow_id: row.escrowId,
  escrowStatus: row.escrowStatus,
  chainId: row.chainId,
  network: row.network,
  created_at: row.createdAt.toISOString()
})

export type Party = { readonly requester: string } | { readonly provider: string }

const WALLET = /^0x[0-9a-fA-F]{40}$/

export class OperatorTransactions extends Effect.Service<OperatorTransactions>()("operator/OperatorTransactions", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const list = (party: Party, query: { readonly limit: number; readonly cursor?: string | undefined }) =>
      Effect.gen(function* () {
        const after = yield* decodeTimeCursor(query.cursor)
        const who = "provider" in party
          ? sql`e.agent_id = ${party.provider}::uuid`
          : WALLET.test(party.requester)
          ? sql`e.payer = ${party.requester.toLowerCase()}`
          : sql`p.agent_id = ${party.requester}::uuid`
        const rows = yield* txRows(sql`
          SELECT e.id, e.transaction_id, e.payer, p.agent_id::text AS requesting_agent, e.agent_id::text AS agent_id, e.capability_id,
                 e.status, e.price::text AS price, e.platform_fee::text AS platform_fee, e.platform_cut::text AS platform_cut,
                 e.agent_earnings::text AS agent_earnings, e.execution_time_ms, e.escrow_id, s.status AS escrow_status,
                 e.chain_id::text AS chain_id, py.network, e.created_at, e.created_at::text AS created_key
          FROM executions e
          JOIN escrows s ON s.execution_id = e.id
          JOIN payments py ON py.id = e.payment_id
          LEFT JOIN executions p ON p.id = e.parent_execution_id
          WHERE ${sql.and([
          who,
          ...Option.match(after, { onNone: () => [], onSome: (c) => [sql`(e.created_at, e.id) < (${c.at}::timestamptz, ${c.id})`] })
        ])}
          ORDER BY e.created_at DESC, e.id DESC LIMIT ${query.limit + 1}`).pipe(Effect.orDie)
        const { items, pagination } = page(rows, query.limit, (r) => [r.createdKey, r.id])
        return { ...party, transactions: items.map(view), pagination }
      }).pipe(Effect.withSpan("OperatorTransactions.list"))

    return { list } as const
  })
}) {}
