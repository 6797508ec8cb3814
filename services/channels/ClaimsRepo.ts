// The bookkeeping of channel claims and settles in PostgreSQL (migrations/0049_channel_claims.sql): which channels a
// claim pass takes (and the take itself, `channel_claim`), which claim transaction carries which totalClaimed, what a
// settle moves per channel, and their outcomes, each recorded once (only rows still linked to the transaction move).
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { rowsOf } from "../sql/Rows.js"

/** What a claim submits for one channel: the row's config and its current voucher, which covers everything charged. */
export const ClaimRow = Schema.Struct({
  id: Schema.String,
  payer: Schema.String,
  payerAuthorizer: Schema.String,
  receiver: Schema.String,
  receiverAuthorizer: Schema.String,
  token: Schema.String,
  withdrawDelay: Schema.Number,
  salt: Schema.String,
  claimedCumulative: Schema.BigInt,
  voucherMaxClaimable: Schema.BigInt,
  voucherSignature: Schema.String
})
export type ClaimRow = typeof ClaimRow.Type

const ChannelAmount = Schema.Struct({ id: Schema.String, amount: Schema.BigInt, unsettled: Schema.BigInt })
export type ChannelAmount = typeof ChannelAmount.Type

const claimRows = rowsOf(ClaimRow)
const amounts = rowsOf(ChannelAmount)
const ids = rowsOf(Schema.Struct({ id: Schema.String }))

export interface DueQuery {
  readonly network: string
  /** Our receiver authorizer (lowercase): one claim transaction carries one authorizer's channels. */
  readonly authorizer: string
  readonly now: Date
  /** The schedule is due: every channel with anything unclaimed goes, not only those past the threshold. */
  readonly scheduled: boolean
  readonly claimAt: bigint
  readonly limit: number
}

export class ChannelClaimsRepo extends Effect.Service<ChannelClaimsRepo>()("channels/ClaimsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /**
     * One transaction: the channels due for a claim on the network (no claim of theirs in flight, not waiting out a
     * failed one), each taken with `channel_claim` (what is charged becomes claimed), and what the claim submits for
     * each: everything claimed and not yet on chain, a taken claim that never landed included (sent again, same
     * totalClaimed). Due: a take that has not landed; unclaimed charges at the threshold; a pending withdrawal; or the
     * schedule.
     */
    const takeDue = (q: DueQuery) =>
      sql.withTransaction(Effect.gen(function* () {
        const due = yield* ids(sql`
          SELECT id FROM channels
          WHERE network = ${q.network} AND receiver_authorizer = ${q.authorizer} AND salt IS NOT NULL AND voucher_signature IS NOT NULL
            AND status IN ('open', 'withdrawing', 'claimFailed') AND claim_tx_id IS NULL
            AND (claim_next_at IS NULL OR claim_next_at <= ${q.now})
            AND (claimed_cumulative > claimed_on_chain
                 OR charged_cumulative - claimed_cumulative >= ${q.claimAt}
                 OR (claim_due_at <= ${q.now} AND charged_cumulative > claimed_on_chain)
                 OR (${q.scheduled} AND charged_cumulative > claimed_cumulative))
          ORDER BY claim_due_at NULLS LAST, charged_cumulative - claimed_on_chain DESC
          LIMIT ${q.limit} FOR UPDATE SKIP LOCKED`)
        if (due.length === 0) return []
        const list = due.map((r) => r.id)
        yield* sql`WITH due AS MATERIALIZED (SELECT id FROM channels WHERE id IN ${sql.in(list)})
                   SELECT due.id FROM due CROSS JOIN LATERAL channel_claim(due.id) t`
        return yield* claimRows(sql`
          SELECT id, payer, payer_authorizer, receiver, receiver_authorizer, token, withdraw_delay, salt, claimed_cumulative,
                 voucher_max_claimable, voucher_signature
          FROM channels WHERE id IN ${sql.in(list)} AND claimed_cumulative > claimed_on_chain ORDER BY id`)
      })).pipe(Effect.withSpan("ChannelClaimsRepo.takeDue"))

    /** Inside the transaction that stores the claim's signed bytes: what it carries, and its channels marked in flight. */
    const linkClaim = (txId: string, lines: ReadonlyArray<{ readonly id: string; readonly totalClaimed: bigint }>) =>
      Effect.gen(function* () {
        yield* sql`INSERT INTO channel_claim_items ${sql.insert(lines.map((l) => ({ treasuryTxId: txId, channelId: l.id, totalClaimed: l.totalClaimed.toString() })))}`
        yield* sql`UPDATE channels SET claim_tx_id = ${txId}, updated_at = now() WHERE id IN ${sql.in(lines.map((l) => l.id))}`
      })

    /**
     * The claim landed: the channels it still carries are free (once); `amount` is the totalClaimed it set on chain
     * (the machine's CLAIMED books it as claimed_on_chain).
     */
    const claimLanded = (txId: string) =>
      amounts(sql`
        UPDATE channels c SET claim_tx_id = NULL, claim_next_at = NULL, updated_at = now()
        FROM channel_claim_items i
        WHERE i.treasury_tx_id = ${txId} AND i.channel_id = c.id AND c.claim_tx_id = ${txId}
        RETURNING c.id, i.total_claimed AS amount, 0::bigint AS unsettled`)

    /** The claim did not land (reverted, dropped, or never sent): its channels are free to be claimed again from `retryAt`. */
    const claimMissed = (txId: string, retryAt: Date | null) =>
      ids(sql`UPDATE channels SET claim_tx_id = NULL, claim_next_at = ${retryAt}, updated_at = now()
              WHERE claim_tx_id = ${txId} RETURNING id`)

    /** Channels taken for a claim that could not be sent: free again (their take stays; the next claim carries it). */
    const release = (channelIds: ReadonlyArray<string>, retryAt: Date | null) =>
      channelIds.length === 0
        ? Effect.void
        : sql`UPDATE channels SET claim_next_at = ${retryAt}, updated_at = now() WHERE id IN ${sql.in(channelIds)} AND claim_tx_id IS NULL`.pipe(Effect.asVoid)

    /**
     * In one transaction: nothing on the network may change the contract's claimed-unsettled pool meanwhile (no claim or
     * refund in flight, no settle unbooked), then each channel's claimed-on-chain money not yet settled. Empty: nothing
     * to settle now.
     */
    const settleDue = (network: string) =>
      Effect.gen(function* () {
        const busy = yield* sql<{ n: number }>`
          SELECT ((SELECT count(*) FROM channels WHERE network = ${network} AND claim_tx_id IS NOT NULL)
                + (SELECT count(*) FROM channel_refunds r JOIN channels c ON c.id = r.channel_id WHERE c.network = ${network} AND r.status = 'submitted')
                + (SELECT count(*) FROM channel_settle_items s JOIN channels c ON c.id = s.channel_id WHERE c.network = ${network} AND NOT s.booked))::int AS n`
        if ((busy[0]?.n ?? 0) > 0) return []
        return yield* amounts(sql`
          SELECT id, claimed_on_chain - settled_cumulative AS amount, 0::bigint AS unsettled FROM channels
          WHERE network = ${network} AND claimed_on_chain > settled_cumulative ORDER BY id FOR UPDATE`)
      })

    const linkSettle = (txId: string, items: ReadonlyArray<{ readonly id: string; readonly amount: bigint }>) =>
      sql`INSERT INTO channel_settle_items ${sql.insert(items.map((i) => ({ treasuryTxId: txId, channelId: i.id, amount: i.amount.toString() })))}`.pipe(Effect.asVoid)

    /**
     * The settle's money reached the treasury: each channel's part (once), and what stays claimed but unsettled after
     * it. The machine's SETTLED books the part (ledger and settled_cumulative).
     */
    const settleBooked = (txId: string) =>
      amounts(sql`
        WITH booked AS (
          UPDATE channel_settle_items SET booked = true WHERE treasury_tx_id = ${txId} AND NOT booked RETURNING channel_id, amount)
        SELECT c.id, b.amount, c.claimed_on_chain - c.settled_cumulative - b.amount AS unsettled
        FROM booked b JOIN channels c ON c.id = b.channel_id ORDER BY c.id FOR UPDATE OF c`)

    /** A settle that moved nothing we can book (dropped): its items go, the next pass builds the settle again. */
    const settleForgotten = (txId: string) =>
      sql`DELETE FROM channel_settle_items WHERE treasury_tx_id = ${txId} AND NOT booked`.pipe(Effect.asVoid)

    return { takeDue, linkClaim, claimLanded, claimMissed, release, settleDue, linkSettle, settleBooked, settleForgotten } as const
  })
}) {}
