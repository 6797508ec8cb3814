// The double-entry ledger: balanced transfers between accounts, always inside the caller's database transaction.
import { SqlClient, type SqlError } from "@effect/sql"
import { Data, Effect } from "effect"
import { newId } from "../../src/domain/Ids.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { countFlows } from "./flows.js"
import { withSpan } from "../../layers/observability/span.js"

/** Fixed platform accounts (see migrations/0001_init.sql). */
export const Accounts = {
  treasury: "treasury",
  settlementReceivable: "settlement_receivable",
  escrow: "escrow",
  refundsPayable: "refunds_payable",
  withdrawalsPayable: "withdrawals_payable",
  disputesHeld: "disputes_held",
  platformRevenue: "platform_revenue",
  /** Chain budgets paid by root clients, not yet spent by sub-calls nor refunded (migration 0015). */
  chainBudgets: "chain_budgets",
  /** Charged against payers' batch-settlement channels, not yet settled to the treasury (migration 0046). */
  channelReceivable: "channel_receivable",
  /** Charged against channels, never claimed before the payer's money left them (migration 0048; an expense). */
  channelLosses: "channel_losses",
  agentAvailable: (agentId: string) => `agent:${agentId}:available`,
  agentPending: (agentId: string) => `agent:${agentId}:pending`,
  /** What the agent owes the platform: earnings a dispute took back that it had already withdrawn (opened on first use). */
  agentDebt: (agentId: string) => `agent:${agentId}:debt`
} as const

/** Debit `debit`, credit `credit` by `amount` micro-USDC (amount > 0). */
export interface Movement {
  readonly debit: string
  readonly credit: string
  readonly amount: bigint
}

export interface TransferInput {
  readonly kind: string
  readonly movements: ReadonlyArray<Movement>
  readonly paymentId?: string
  readonly agentId?: string
  readonly subjectId?: string
  readonly memo?: string
  /** Treasury movements: the on-chain transaction and the block it was mined in (reconciliation compares by block). */
  readonly chainBlock?: bigint | null
  readonly txHash?: string | null
}

export class LedgerInvariantError extends Data.TaggedError("LedgerInvariantError")<{ readonly message: string }> {}

export class Ledger extends Effect.Service<Ledger>()("Ledger", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /**
     * The statements of one balanced transfer (the transfer row, then its entries), checked here and again by the
     * database at commit (deferred constraint trigger). For callers that batch writes; `transfer` runs them.
     */
    const transferRows = (input: TransferInput) =>
      Effect.gen(function* () {
        const movements = input.movements.filter((m) => m.amount !== 0n)
        if (movements.some((m) => m.amount < 0n || m.debit === m.credit)) {
          return yield* new LedgerInvariantError({ message: `invalid movement in ${input.kind}` })
        }
        if (movements.length === 0) return yield* new LedgerInvariantError({ message: `empty transfer ${input.kind}` })
        countFlows(movements)
        const id = newId("ltr")
        // Sorted by account: the balance trigger locks agents' account rows in this order (one order everywhere: no deadlock).
        const entries = movements
          .flatMap((m) => [
            { transferId: id, accountId: m.debit, amount: m.amount.toString() },
            { transferId: id, accountId: m.credit, amount: (-m.amount).toString() }
          ])
          .sort((a, b) => (a.accountId < b.accountId ? -1 : a.accountId > b.accountId ? 1 : 0))
        const transfer = {
          id,
          kind: input.kind,
          paymentId: input.paymentId ?? null,
          agentId: input.agentId ?? null,
          subjectId: input.subjectId ?? null,
          memo: input.memo ?? null,
          chainBlock: input.chainBlock === undefined || input.chainBlock === null ? null : input.chainBlock.toString(),
          txHash: input.txHash ?? null
        }
        return { id, transfer, entries }
      })

    /** The statements of one balanced transfer: the transfer row, then its entries. */
    const transferStatements = (input: TransferInput) =>
      Effect.map(transferRows(input), ({ entries, id, transfer }) => ({
        id,
        statements: [sql`INSERT INTO ledger_transfers ${sql.insert(transfer)}`, sql`INSERT INTO ledger_entries ${sql.insert(entries)}`]
      }))

    /**
     * Records one balanced transfer in one statement (or in the unit of work's next batch). Must run inside the
     * transaction of the state change it belongs to.
     */
    const transfer = (input: TransferInput): Effect.Effect<string, SqlError.SqlError | LedgerInvariantError> =>
      Effect.gen(function* () {
        const { entries, id, transfer } = yield* transferRows(input)
        yield* UnitOfWork.inserts(sql, [["ledger_transfers", [transfer]], ["ledger_entries", entries]])
        // What the batch will add to agents' balances (kept on their account rows by a trigger), for a batched read.
        for (const m of input.movements) {
          if (m.debit.startsWith("agent:")) yield* UnitOfWork.addPending(m.debit, m.amount)
          if (m.credit.startsWith("agent:")) yield* UnitOfWork.addPending(m.credit, -m.amount)
        }
        return id
      }).pipe(withSpan("Ledger.transfer", { attributes: { kind: input.kind } }))

    /** The agent's two accounts; created with the agent, in its transaction. */
    const openAgentAccounts = (agentId: string) =>
      sql`INSERT INTO ledger_accounts ${sql.insert([
        { id: Accounts.agentAvailable(agentId), kind: "liability", agentId, description: "Earnings the agent can withdraw" },
        { id: Accounts.agentPending(agentId), kind: "liability", agentId, description: "Earnings held until the settlement delay passes" }
      ])} ON CONFLICT (id) DO NOTHING`.pipe(Effect.asVoid)

    /**
     * Debit-positive balance of an account (liabilities and revenue come out negative). Agents' accounts keep theirs
     * on the account row (maintained by a trigger with every entry); platform accounts are summed.
     */
    const balance = (accountId: string) =>
      (accountId.startsWith("agent:")
        ? sql<{ balance: string }>`SELECT balance::text AS balance FROM ledger_accounts WHERE id = ${accountId}`
        : sql<{ balance: string }>`SELECT COALESCE(SUM(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = ${accountId}`
      ).pipe(Effect.map((rows) => BigInt(rows[0]?.balance ?? "0")))

    /** The agent's debt account, opened the first time a dispute finds its earnings already withdrawn. */
    const openDebtAccount = (agentId: string) =>
      sql`INSERT INTO ledger_accounts ${sql.insert({
        id: Accounts.agentDebt(agentId),
        kind: "asset",
        agentId,
        description: "Owed by the agent: disputed earnings it had already withdrawn, repaid from its next earnings"
      })} ON CONFLICT (id) DO NOTHING`.pipe(Effect.asVoid)

    /** A payer's credit account (a metered call's remainder kept at the payer's request), opened on first use. */
    const openCreditAccount = (account: string, wallet: string) =>
      sql`INSERT INTO ledger_accounts ${sql.insert({ id: account, kind: "liability", description: `Credit of payer ${wallet.toLowerCase()}` })}
          ON CONFLICT (id) DO NOTHING`.pipe(Effect.asVoid)

    /** Another network's treasury (`account`: "treasury:<network>") and its opening equity, opened at start. */
    const openTreasuryAccount = (account: string, network: string) =>
      sql`INSERT INTO ledger_accounts ${sql.insert([
        { id: account, kind: "asset", description: `USDC in the treasury on ${network}` },
        { id: `treasury_opening:${network}`, kind: "equity", description: `USDC the treasury held on ${network} (beyond what the ledger explained) when reconciling started` }
      ])} ON CONFLICT (id) DO NOTHING`.pipe(Effect.asVoid)

    return { transfer, transferStatements, openAgentAccounts, openDebtAccount, openTreasuryAccount, openCreditAccount, balance } as const
  })
}) {}
