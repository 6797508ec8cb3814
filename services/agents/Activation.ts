// What a settled or failed registration fee does to its agent: activation with its ledger accounts, or removal of the pending row.
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { formatUsdc } from "../../src/domain/Money.js"
import { Networks } from "../../layers/Networks.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import type { PaymentRow } from "../payments/Repo.js"

export class AgentActivation extends Effect.Service<AgentActivation>()("agents/AgentActivation", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const networks = yield* Networks

    /** The registration fee settled: the agent goes live with its ledger accounts, in the settlement's transaction. */
    const settled = (payment: PaymentRow, txHash: string, block: bigint | null) =>
      Effect.gen(function* () {
        const agentId = payment.subjectId
        yield* sql`UPDATE agents SET status = 'active', registration_tx_hash = ${txHash}, updated_at = now()
                   WHERE id = ${agentId} AND status = 'pending'`
        yield* ledger.openAgentAccounts(agentId)
        yield* ledger.transfer({
          kind: "registration_fee",
          movements: [{ debit: networks.treasuryAccount(payment.network), credit: Accounts.platformRevenue, amount: payment.amount }],
          paymentId: payment.id,
          agentId,
          subjectId: agentId,
          chainBlock: block,
          txHash
        }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
        yield* outbox.emit("payment.received", agentId, {
          paymentId: payment.id,
          purpose: "registration",
          agentId,
          amount: formatUsdc(payment.amount),
          payer: payment.payer,
          txHash
        })
        yield* outbox.emit("agent.registered", agentId, { agentId })
      })

    /** The fee can never settle: the pending agent is removed, freeing the wallet. */
    const failed = (payment: PaymentRow) => sql`DELETE FROM agents WHERE id = ${payment.subjectId} AND status = 'pending'`.pipe(Effect.asVoid)

    return { settled, failed } as const
  }),
  dependencies: [Ledger.Default, Outbox.Default]
}) {}
