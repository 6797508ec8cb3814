// Chains in PostgreSQL: the chain row (with its machine), the facts its machine decides on, the one-statement budget
// reservation and its give-back, and the executions of a chain for its tree and cost.
import { SqlClient } from "@effect/sql"
import { rowsOf } from "../sql/Rows.js"
import { Effect, Layer, Option, Schema } from "effect"
import { ChainBudgetReturns } from "../../src/domain/Funding.js"

export const ChainStatus = Schema.Literal("pending", "running", "completed", "failed", "partial")
export type ChainStatus = typeof ChainStatus.Type

export const ChainRow = Schema.Struct({
  id: Schema.String,
  rootExecutionId: Schema.String,
  rootAgentId: Schema.String,
  paymentId: Schema.String,
  payer: Schema.String,
  totalBudget: Schema.BigInt,
  remaining: Schema.BigInt,
  maxDepth: Schema.Number,
  status: ChainStatus,
  machineSnapshot: Schema.Unknown,
  traceId: Schema.String,
  refundAmount: Schema.NullOr(Schema.BigInt),
  budgetWarned: Schema.Boolean,
  startedAt: Schema.DateFromSelf,
  completedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type ChainRow = typeof ChainRow.Type

/** What the chain's machine decides on, read after the chain row is locked (a fresh snapshot: nothing stale). */
export const ChainFacts = Schema.Struct({
  rootStatus: Schema.String,
  inFlight: Schema.Number,
  paymentStatus: Schema.String,
  paymentTxHash: Schema.NullOr(Schema.String)
})
export type ChainFacts = typeof ChainFacts.Type
export type LockedChain = ChainRow & { readonly facts: ChainFacts }

/** One execution of a chain, for its tree, its cost and its outcome. */
export const NodeRow = Schema.Struct({
  id: Schema.String,
  transactionId: Schema.String,
  agentId: Schema.String,
  agentName: Schema.String,
  capabilityId: Schema.String,
  status: Schema.String,
  escrowStatus: Schema.String,
  depth: Schema.Number,
  parentExecutionId: Schema.NullOr(Schema.String),
  price: Schema.BigInt,
  platformFee: Schema.BigInt,
  agentFee: Schema.BigInt,
  platformCut: Schema.BigInt,
  agentEarnings: Schema.BigInt,
  executionTimeMs: Schema.NullOr(Schema.Number),
  createdAt: Schema.DateFromSelf,
  completedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type NodeRow = typeof NodeRow.Type

const chains = rowsOf(ChainRow)
const decodeFacts = Schema.decodeUnknown(ChainFacts)
const nodeRows = rowsOf(NodeRow)

/** The remaining budget after a reservation, and whether this reservation crossed the warning line. */
export interface Reserved {
  readonly remaining: bigint
  readonly totalBudget: bigint
  readonly rootAgentId: string
  readonly warn: boolean
}

/** chain.budget_warning fires once, when a reservation leaves less than this share (1/5 = 20%) of the total budget. */
export const BUDGET_WARNING_DIVISOR = 5n

export class ChainsRepo extends Effect.Service<ChainsRepo>()("chains/ChainsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const find = (id: string) => Effect.map(chains(sql`SELECT * FROM chains WHERE id = ${id}`), (r) => Option.fromNullable(r[0]))

    /** By chain id (a UUID) or by its root execution's transaction id (tx_…). */
    const findByKey = (key: string) =>
      Effect.map(
        chains(
          /^[0-9a-f-]{36}$/i.test(key)
            ? sql`SELECT * FROM chains WHERE id = ${key}`
            : sql`SELECT c.* FROM chains c JOIN executions e ON e.id = c.root_execution_id WHERE e.transaction_id = ${key}`
        ),
        (r) => Option.fromNullable(r[0])
      )

    /** Locks the chain row, then reads the facts its machine decides on (in a second statement, so they are current). */
    const lock = (id: string) =>
      Effect.gen(function* () {
        const [row] = yield* chains(sql`SELECT * FROM chains WHERE id = ${id} FOR UPDATE`)
        if (row === undefined) return Option.none<LockedChain>()
        const [facts] = yield* sql`
          SELECT (SELECT status FROM executions WHERE id = ${row.rootExecutionId}) AS root_status,
                 (SELECT count(*)::int FROM executions WHERE chain_id = ${id} AND depth > 0 AND status = 'pending') AS in_flight,
                 p.status AS payment_status, p.tx_hash AS payment_tx_hash
          FROM payments p WHERE p.id = ${row.paymentId}`
        return Option.some<LockedChain>({ ...row, facts: yield* Effect.orDie(decodeFacts(facts)) })
      })

    /**
     * The budget reservation: one statement, under the chain row's lock, so concurrent sub-calls are serial at this row
     * only and can never overspend. None: the chain is not running, too old, or short of `price`.
     */
    const reserve = (chainId: string, price: bigint, notBefore: Date) =>
      sql<{ remaining: string; totalBudget: string; rootAgentId: string; warn: boolean }>`
        WITH before AS (SELECT id, budget_warned FROM chains WHERE id = ${chainId} FOR UPDATE)
        UPDATE chains c SET remaining = c.remaining - ${price.toString()}::bigint,
               budget_warned = c.budget_warned OR (c.remaining - ${price.toString()}::bigint) * ${BUDGET_WARNING_DIVISOR.toString()}::bigint < c.total_budget,
               updated_at = now()
        FROM before
        WHERE c.id = before.id AND c.status = 'running' AND c.started_at > ${notBefore} AND c.remaining >= ${price.toString()}::bigint
        RETURNING c.remaining::text AS remaining, c.total_budget::text AS total_budget, c.root_agent_id::text AS root_agent_id,
                  (c.budget_warned AND NOT before.budget_warned) AS warn`.pipe(
        Effect.map((rows) =>
          Option.map(Option.fromNullable(rows[0]), (r): Reserved => ({
            remaining: BigInt(r.remaining),
            totalBudget: BigInt(r.totalBudget),
            rootAgentId: r.rootAgentId,
            warn: r.warn
          })))
      )

    /** Every execution of a chain, root first, then by depth and time. */
    const nodes = (chainId: string) =>
      nodeRows(sql`
        SELECT e.id, e.transaction_id, e.agent_id::text AS agent_id, a.name AS agent_name, e.capability_id, e.status,
               s.status AS escrow_status, e.depth, e.parent_execution_id, e.price, e.platform_fee, e.agent_fee, e.platform_cut,
               e.agent_earnings, e.execution_time_ms, e.created_at, e.completed_at
        FROM executions e JOIN escrows s ON s.execution_id = e.id JOIN agents a ON a.id = e.agent_id
        WHERE e.chain_id = ${chainId}
        ORDER BY e.depth, e.created_at, e.id`)

    /** What this root agent's finished chains spent below the root, per depth (for budget-check estimates). */
    const spentByDepth = (rootAgentId: string, limit: number) =>
      sql<{ depth: number; chains: number; spent: string }>`
        WITH recent AS (SELECT id FROM chains WHERE root_agent_id = ${rootAgentId} AND status IN ('completed', 'partial')
                        ORDER BY started_at DESC LIMIT ${limit})
        SELECT e.depth, count(DISTINCT e.chain_id)::int AS chains, COALESCE(SUM(e.price), 0)::text AS spent
        FROM executions e JOIN escrows s ON s.execution_id = e.id
        WHERE e.chain_id IN (SELECT id FROM recent) AND e.depth > 0 AND s.status IN ('held', 'released', 'disputed')
        GROUP BY e.depth ORDER BY e.depth`.pipe(
        Effect.map((rows) => ({ rows: rows.map((r) => ({ depth: r.depth, spent: BigInt(r.spent) })) })),
        Effect.zip(sql<{ n: number }>`SELECT count(*)::int AS n FROM (SELECT 1 FROM chains WHERE root_agent_id = ${rootAgentId}
                                        AND status IN ('completed', 'partial') LIMIT ${limit}) x`),
        Effect.map(([{ rows }, [count]]) => ({ chains: count?.n ?? 0, byDepth: rows }))
      )

    return { find, findByKey, lock, reserve, nodes, spentByDepth } as const
  })
}) {}

/**
 * The chain's side of a failed sub-call's give-back (the execution's step moves its own escrow): the reservation back
 * into the budget, under the chain row's lock, so the chain's end (which refunds what remains) sees all of it or none.
 */
export const ChainBudgetReturnsLive = Layer.effect(ChainBudgetReturns, Effect.map(SqlClient.SqlClient, (sql) => ({
  giveBack: (chainId: string, amount: bigint) =>
    Effect.map(sql<{ rootAgentId: string; remaining: string }>`
      UPDATE chains SET remaining = remaining + ${amount.toString()}::bigint, updated_at = now()
      WHERE id = ${chainId} AND status IN ('pending', 'running')
      RETURNING root_agent_id::text AS root_agent_id, remaining::text AS remaining`, (rows) =>
      Option.map(Option.fromNullable(rows[0]), (r) => ({ rootAgentId: r.rootAgentId, remaining: BigInt(r.remaining) })))
})))
