// The bookkeeping of cooperative channel refunds (migrations/0049_channel_claims.sql `channel_refunds`): the take of
// what is charged before the refund is built (held from claim passes meanwhile), the refund transaction's row, and its
// outcome, recorded once.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { rowsOf } from "../sql/Rows.js"
import { ClaimRow } from "./ClaimsRepo.js"

export const RefundTake = Schema.Struct({
  ...ClaimRow.fields,
  network: Schema.String,
  claimedOnChain: Schema.BigInt,
  settledCumulative: Schema.BigInt,
  claimTxId: Schema.NullOr(Schema.String)
})
export type RefundTake = typeof RefundTake.Type

const takes = rowsOf(RefundTake)
const resolved = rowsOf(Schema.Struct({ channelId: Schema.String, totalClaimed: Schema.NullOr(Schema.BigInt) }))
const unsettled = rowsOf(Schema.Struct({ claimedOnChain: Schema.BigInt, unsettled: Schema.BigInt }))

export class ChannelRefundsRepo extends Effect.Service<ChannelRefundsRepo>()("channels/RefundsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /**
     * One transaction: what is charged on the channel becomes claimed (`channel_claim`), and claim passes leave the
     * channel alone until `holdUntil` (the refund's own claim carries it). None: no such channel, or without the config
     * a claim needs.
     */
    const take = (channelId: string, holdUntil: Date) =>
      sql.withTransaction(Effect.gen(function* () {
        const locked = yield* sql`SELECT id FROM channels WHERE id = ${channelId} AND salt IS NOT NULL AND receiver_authorizer IS NOT NULL FOR UPDATE`
        if (locked.length === 0) return Option.none<RefundTake>()
        yield* sql`SELECT * FROM channel_claim(${channelId})`
        const rows = yield* takes(sql`
          UPDATE channels SET claim_next_at = GREATEST(COALESCE(claim_next_at, ${holdUntil}), ${holdUntil}), updated_at = now() WHERE id = ${channelId}
          RETURNING id, network, payer, payer_authorizer, receiver, receiver_authorizer, token, withdraw_delay, salt, claimed_cumulative,
                    COALESCE(voucher_max_claimable, 0) AS voucher_max_claimable, COALESCE(voucher_signature, '0x') AS voucher_signature,
                    claimed_on_chain, settled_cumulative, claim_tx_id`)
        return Option.fromNullable(rows[0])
      }))

    /** The hold ends (the refund was not sent). */
    const release = (channelId: string) =>
      sql`UPDATE channels SET claim_next_at = NULL, updated_at = now() WHERE id = ${channelId} AND claim_tx_id IS NULL`.pipe(Effect.asVoid)

    /** Inside the transaction that stores the refund's signed bytes. */
    const link = (txId: string, r: { readonly channelId: string; readonly amountAsked: bigint | null; readonly nonce: bigint; readonly totalClaimed: bigint | null }) =>
      Effect.gen(function* () {
        yield* sql`INSERT INTO channel_refunds ${sql.insert({
          treasuryTxId: txId,
          channelId: r.channelId,
          amountAsked: r.amountAsked === null ? null : r.amountAsked.toString(),
          refundNonce: r.nonce.toString(),
          totalClaimed: r.totalClaimed === null ? null : r.totalClaimed.toString(),
          status: "submitted"
        })}`
        if (r.totalClaimed !== null) yield* sql`UPDATE channels SET claim_tx_id = ${txId}, updated_at = now() WHERE id = ${r.channelId}`
      })

    /**
     * The refund landed: recorded once (none when it was recorded before); the chain's totalClaimed after its claim,
     * and what stays claimed but unsettled (the machine's CLAIMED books the former).
     */
    const landed = (txId: string, refunded: bigint, balanceAfter: bigint) =>
      Effect.gen(function* () {
        const rows = yield* resolved(sql`
          UPDATE channel_refunds SET status = 'refunded', refunded = ${refunded}, balance_after = ${balanceAfter}, resolved_at = now()
          WHERE treasury_tx_id = ${txId} AND status = 'submitted' RETURNING channel_id, total_claimed`)
        const row = rows[0]
        if (row === undefined) return Option.none()
        const after = yield* unsettled(sql`
          UPDATE channels SET claim_tx_id = CASE WHEN claim_tx_id = ${txId} THEN NULL ELSE claim_tx_id END, claim_next_at = NULL, updated_at = now()
          WHERE id = ${row.channelId}
          RETURNING GREATEST(claimed_on_chain, ${row.totalClaimed ?? 0n}) AS claimed_on_chain,
                    GREATEST(claimed_on_chain, ${row.totalClaimed ?? 0n}) - settled_cumulative AS unsettled`)
        return Option.some({ ...row, ...after[0]! })
      })

    /** The refund did not land (reverted or dropped): nothing moved; the channel is claimed as usual again. */
    const missed = (txId: string) =>
      Effect.gen(function* () {
        const rows = yield* resolved(sql`
          UPDATE channel_refunds SET status = 'failed', resolved_at = now() WHERE treasury_tx_id = ${txId} AND status = 'submitted'
          RETURNING channel_id, total_claimed`)
        for (const r of rows) {
          yield* sql`UPDATE channels SET claim_tx_id = CASE WHEN claim_tx_id = ${txId} THEN NULL ELSE claim_tx_id END, claim_next_at = NULL, updated_at = now()
                     WHERE id = ${r.channelId}`
        }
        return rows.length > 0
      })

    const find = (txId: string) =>
      rowsOf(Schema.Struct({ status: Schema.String, refunded: Schema.NullOr(Schema.BigInt), balanceAfter: Schema.NullOr(Schema.BigInt) }))(
        sql`SELECT status, refunded, balance_after FROM channel_refunds WHERE treasury_tx_id = ${txId}`
      ).pipe(Effect.map((r) => Option.fromNullable(r[0])))

    return { take, release, link, landed, missed, find } as const
  })
}) {}
