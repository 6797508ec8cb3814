// Channel deposits in PostgreSQL (migrations/0048_channel_machine.sql): one row per ERC-3009 nonce, written in the
// same transaction as the treasury transaction that sends it, so a deposit is sent once however often it is re-sent.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { rowsOf } from "../sql/Rows.js"

export const DepositRow = Schema.Struct({
  nonce: Schema.String,
  channelId: Schema.String,
  amount: Schema.BigInt,
  treasuryTxId: Schema.NullOr(Schema.String),
  status: Schema.Literal("sending", "included", "failed"),
  failureReason: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type DepositRow = typeof DepositRow.Type

const rows = rowsOf(DepositRow)

export class DepositsRepo extends Effect.Service<DepositsRepo>()("channels/DepositsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const find = (nonce: string) => Effect.map(rows(sql`SELECT * FROM channel_deposits WHERE nonce = ${nonce}`), (r) => Option.fromNullable(r[0]))

    /** In the transaction that stores the signed deposit: a second sender of the same nonce fails here (unique key). */
    const insert = (deposit: { readonly nonce: string; readonly channelId: string; readonly amount: bigint }, treasuryTxId: string) =>
      sql`INSERT INTO channel_deposits (nonce, channel_id, amount, treasury_tx_id, status)
          VALUES (${deposit.nonce}, ${deposit.channelId}, ${deposit.amount}, ${treasuryTxId}, 'sending')`.pipe(Effect.asVoid)

    /** The deposit's outcome, once: true for the caller that moved it out of `sending` (it delivers the channel's event). */
    const settle = (nonce: string, outcome: { readonly status: "included" } | { readonly status: "failed"; readonly reason: string }) =>
      Effect.map(
        sql`UPDATE channel_deposits SET status = ${outcome.status}, failure_reason = ${outcome.status === "failed" ? outcome.reason.slice(0, 500) : null},
              updated_at = now()
            WHERE nonce = ${nonce} AND status = 'sending' RETURNING nonce`,
        (r) => r.length > 0
      )

    /**
     * The channel row of a first deposit, its machine started; a channel whose first deposit failed starts a new life
     * (it was never charged and holds nothing). Answers the row's status before this deposit.
     */
    const openOrRevive = (channel: {
      readonly id: string
      readonly network: string
      readonly payer: string
      readonly payerAuthorizer: string
      readonly receiver: string
      readonly token: string
      readonly withdrawDelay: number
      /** The rest of the config a claim submits (migration 0049). */
      readonly salt: string
      readonly receiverAuthorizer: string
    }, snapshot: unknown) =>
      Effect.map(
        sql<{ status: string }>`
          INSERT INTO channels (id, network, payer, payer_authorizer, receiver, token, withdraw_delay, balance, salt, receiver_authorizer,
                                status, machine_snapshot)
          VALUES (${channel.id}, ${channel.network}, ${channel.payer}, ${channel.payerAuthorizer}, ${channel.receiver}, ${channel.token},
                  ${channel.withdrawDelay}, 0, ${channel.salt}, ${channel.receiverAuthorizer}, 'depositPending', ${JSON.stringify(snapshot)}::jsonb)
          ON CONFLICT (id) DO UPDATE SET status = 'depositPending', machine_snapshot = EXCLUDED.machine_snapshot, updated_at = now()
            WHERE channels.status = 'depositFailed'
          RETURNING status`,
        (r) => r.length > 0
      )

    /** A channel whose first deposit failed while another deposit of it was included: it starts again (depositPending). */
    const revive = (channelId: string, snapshot: unknown) =>
      sql`UPDATE channels SET status = 'depositPending', machine_snapshot = ${JSON.stringify(snapshot)}::jsonb, updated_at = now()
          WHERE id = ${channelId} AND status = 'depositFailed'`.pipe(Effect.asVoid)

    return { find, insert, settle, openOrRevive, revive } as const
  })
}) {}
