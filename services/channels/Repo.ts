// Batch-settlement channels in PostgreSQL: the row (mirror of the contract's channel, what we charged, the latest
// voucher, the machine snapshot) and the one-statement compare-and-set charge, its return and the claim's take
// (migrations/0046_channels.sql; docs/settlement.md "Channels: state and charges").
import { SqlClient, type SqlError, type Statement } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { rowsOf } from "../sql/Rows.js"

export const ChannelStatus = Schema.Literal("depositPending", "open", "withdrawing", "claimFailed", "drained", "closed", "depositFailed")
export type ChannelStatus = typeof ChannelStatus.Type

export const ChannelRow = Schema.Struct({
  id: Schema.String,
  network: Schema.String,
  payer: Schema.String,
  payerAuthorizer: Schema.String,
  receiver: Schema.String,
  token: Schema.String,
  withdrawDelay: Schema.Number,
  balance: Schema.BigInt,
  chargedCumulative: Schema.BigInt,
  claimedCumulative: Schema.BigInt,
  settledCumulative: Schema.BigInt,
  voucherMaxClaimable: Schema.NullOr(Schema.BigInt),
  voucherSignature: Schema.NullOr(Schema.String),
  status: ChannelStatus,
  machineSnapshot: Schema.Unknown,
  /** When the claims worker must claim the channel (set when the payer starts a withdrawal; migration 0048). */
  claimDueAt: Schema.NullOr(Schema.DateFromSelf),
  finalizableAt: Schema.NullOr(Schema.DateFromSelf),
  /** The contract's totalClaimed as the last landed claim left it. */
  claimedOnChain: Schema.BigInt,
  /** Charged but never claimed on chain when the payer's money left: booked to channel_losses. */
  writtenOff: Schema.BigInt,
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type ChannelRow = typeof ChannelRow.Type

/** A channel we learnt of (its deposit seen in a payment): the contract's config, lowercase hex. */
export interface NewChannel {
  readonly id: string
  readonly network: string
  readonly payer: string
  readonly payerAuthorizer: string
  readonly receiver: string
  readonly token: string
  readonly withdrawDelay: number
  readonly balance: bigint
  /**
   * The rest of the config a claim submits (the contract hashes the whole config into the channel id): the payer's
   * salt and the receiver authorizer the channel names. A row without them is never claimed (migration 0049).
   */
  readonly salt: string | null
  readonly receiverAuthorizer: string | null
}

/** A voucher over the channel's cumulative ceiling (its EIP-712 signature is verified before the charge). */
export interface Voucher {
  readonly maxClaimable: bigint
  readonly signature: string
}

export interface ChargeInput {
  readonly channelId: string
  readonly requestId: string
  readonly amount: bigint
  readonly voucher: Voucher
  /** What the payer believes the channel's charged cumulative is (the voucher is signed over it). */
  readonly expectedCumulative: bigint
}

export const ChargeOutcome = Schema.Struct({
  outcome: Schema.Literal("charged", "replayed", "request_conflict", "unknown_channel", "not_open", "invalid_amount", "stale", "voucher_short", "over_balance"),
  /** The channel's state after the statement: what a corrective 402 tells the payer to sign over. */
  chargedCumulative: Schema.NullOr(Schema.BigInt),
  balance: Schema.NullOr(Schema.BigInt),
  voucherMaxClaimable: Schema.NullOr(Schema.BigInt)
})
export type ChargeOutcome = typeof ChargeOutcome.Type

export const ReturnOutcome = Schema.Struct({
  outcome: Schema.Literal("returned", "already_returned", "claimed", "unknown"),
  chargedCumulative: Schema.NullOr(Schema.BigInt)
})
export type ReturnOutcome = typeof ReturnOutcome.Type

export const ClaimTake = Schema.Struct({
  totalClaimed: Schema.BigInt,
  voucherMaxClaimable: Schema.BigInt,
  voucherSignature: Schema.String
})
export type ClaimTake = typeof ClaimTake.Type

/** A finished call's charge kept (all, part, or none of it: the rest back to the channel). */
export const KeepOutcome = Schema.Struct({
  outcome: Schema.Literal("kept", "already", "unknown"),
  kept: Schema.BigInt,
  givenBack: Schema.BigInt,
  chargedCumulative: Schema.NullOr(Schema.BigInt)
})
export type KeepOutcome = typeof KeepOutcome.Type

/** Where a dispute's client share of a channel-paid call goes (migrations/0053_channel_dispute_refunds.sql). */
export const DisputeRefund = Schema.Struct({
  outcome: Schema.Literal("channel", "claimed", "written_off", "not_kept", "short", "unknown"),
  /** The charge's kept amount after the statement. */
  kept: Schema.BigInt,
  chargedCumulative: Schema.NullOr(Schema.BigInt)
})
export type DisputeRefund = typeof DisputeRefund.Type

const rows = rowsOf(ChannelRow)
const keeps = rowsOf(KeepOutcome)
const outcomes = rowsOf(ChargeOutcome)
const returns = rowsOf(ReturnOutcome)
const takes = rowsOf(ClaimTake)
const disputeRefunds = rowsOf(DisputeRefund)

/** The outcome the statements always answer with one row; none is a bug in our SQL. */
const single = <A>(r: ReadonlyArray<A>): Effect.Effect<A> =>
  r[0] === undefined ? Effect.dieMessage("a channel statement answered no row") : Effect.succeed(r[0])

export const makeChannelsRepo = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const first = (r: ReadonlyArray<ChannelRow>) => Option.fromNullable(r[0])

  const insert = (channel: NewChannel, status: ChannelStatus, snapshot: unknown) =>
    sql`INSERT INTO channels (id, network, payer, payer_authorizer, receiver, token, withdraw_delay, balance, salt, receiver_authorizer,
                          status, machine_snapshot)
        VALUES (${channel.id}, ${channel.network}, ${channel.payer}, ${channel.payerAuthorizer}, ${channel.receiver},
                ${channel.token}, ${channel.withdrawDelay}, ${channel.balance}, ${channel.salt?.toLowerCase() ?? null},
                ${channel.receiverAuthorizer?.toLowerCase() ?? null}, ${status}, ${JSON.stringify(snapshot)}::jsonb)
        ON CONFLICT (id) DO NOTHING`.pipe(Effect.asVoid)

  const find = (id: string) => Effect.map(rows(sql`SELECT * FROM channels WHERE id = ${id}`), first)
  /** For the machine host: the row locked for the caller's transaction. */
  const lock = (id: string) => Effect.map(rows(sql`SELECT * FROM channels WHERE id = ${id} FOR UPDATE`), first)

  /** The machine's state and snapshot, in the caller's transaction (with the host's history row). */
  const saveMachine = (id: string, status: ChannelStatus, snapshot: unknown) =>
    sql`UPDATE channels SET status = ${status}, machine_snapshot = ${JSON.stringify(snapshot)}::jsonb, updated_at = now()
        WHERE id = ${id}`.pipe(Effect.asVoid)

  /** The on-chain balance as read (a top-up raises the ceiling; the CHECK refuses one below what is charged). */
  const mirrorBalance = (id: string, balance: bigint) =>
    sql`UPDATE channels SET balance = ${balance}, updated_at = now() WHERE id = ${id}`.pipe(Effect.asVoid)

  /**
   * The charge as a statement fragment, for a caller that makes it part of a larger statement (the paid call's
   * reservation): `SELECT * FROM channel_charge(…)`.
   */
  const chargeStatement = (input: ChargeInput): Statement.Statement<unknown> =>
    sql`SELECT * FROM channel_charge(${input.channelId}, ${input.requestId}, ${input.amount}, ${input.voucher.maxClaimable},
                                     ${input.voucher.signature}, ${input.expectedCumulative})`

  /** One statement: charged exactly once per request id, never past the voucher's ceiling or the balance. */
  const charge = (input: ChargeInput): Effect.Effect<ChargeOutcome, SqlError.SqlError> =>
    outcomes(chargeStatement(input)).pipe(Effect.flatMap(single), Effect.withSpan("ChannelsRepo.charge"))

  /** One statement: a charge no claim has taken goes back (charged_cumulative lowered once). */
  const returnCharge = (requestId: string): Effect.Effect<ReturnOutcome, SqlError.SqlError> =>
    returns(sql`SELECT * FROM channel_return_charge(${requestId})`).pipe(Effect.flatMap(single), Effect.withSpan("ChannelsRepo.returnCharge"))

  /**
   * One statement, in the call's record transaction: the call is over and keeps `keep` of its charge (≤ the charge);
   * the rest goes back to the channel. Once per request (a second call answers `already`).
   */
  const keep = (requestId: string, kept: bigint): Effect.Effect<KeepOutcome, SqlError.SqlError> =>
    keeps(sql`SELECT * FROM channel_keep_charge(${requestId}, ${kept})`).pipe(Effect.flatMap(single), Effect.withSpan("ChannelsRepo.keep"))

  /**
   * One statement, under the channel row's lock (held to the end of the caller's transaction): where a dispute's client
   * share of the call `requestId` goes; with `apply`, a 'channel' answer has taken it off the charge and the channel's
   * charged total (the next claim takes less).
   */
  const disputeRefund = (requestId: string, amount: bigint, apply: boolean): Effect.Effect<DisputeRefund, SqlError.SqlError> =>
    disputeRefunds(sql`SELECT * FROM channel_dispute_refund(${requestId}, ${amount}, ${apply})`).pipe(
      Effect.flatMap(single),
      Effect.withSpan("ChannelsRepo.disputeRefund")
    )

  /** The channel a payment was charged to, if it was a channel payment (a call's, or a chain budget's). */
  const channelOfPayment = (paymentId: string): Effect.Effect<Option.Option<string>, SqlError.SqlError> =>
    Effect.map(sql<{ readonly channelId: string | null }>`SELECT channel_id FROM payments WHERE id = ${paymentId}`, (r) => Option.fromNullable(r[0]?.channelId))

  /** One statement: the kept charges become claimed; what the claim submits, or none when nothing is new. */
  const claim = (channelId: string): Effect.Effect<Option.Option<ClaimTake>, SqlError.SqlError> =>
    takes(sql`SELECT * FROM channel_claim(${channelId})`).pipe(Effect.map((r) => Option.fromNullable(r[0])), Effect.withSpan("ChannelsRepo.claim"))

  /** The claims worker must claim the channel by `due` (the earlier of this and any due time already set). */
  const claimDue = (id: string, due: Date, finalizableAt: Date) =>
    sql`UPDATE channels SET claim_due_at = LEAST(coalesce(claim_due_at, ${due}), ${due}), finalizable_at = ${finalizableAt}, updated_at = now()
        WHERE id = ${id}`.pipe(Effect.asVoid)

  /** A claim landed: the chain's totalClaimed; nothing is due any more once it covers everything charged. */
  const claimedOnChain = (id: string, totalClaimed: bigint) =>
    sql`UPDATE channels SET claimed_on_chain = GREATEST(claimed_on_chain, ${totalClaimed}),
          claim_due_at = CASE WHEN GREATEST(claimed_on_chain, ${totalClaimed}) >= charged_cumulative THEN NULL ELSE claim_due_at END,
          updated_at = now()
        WHERE id = ${id}`.pipe(Effect.asVoid)

  /** A settle moved `amount` of the channel's claimed money to the treasury (with its ledger transfer). */
  const settled = (id: string, amount: bigint) =>
    sql`UPDATE channels SET settled_cumulative = settled_cumulative + ${amount}, updated_at = now() WHERE id = ${id}`.pipe(Effect.asVoid)

  /**
   * The payer's money left: what was charged beyond the chain's totalClaimed is written off (with its ledger transfer),
   * and the charges it covers are marked. Nothing is due to claim any more.
   */
  const writeOff = (id: string, amount: bigint, claimedOnChain: bigint) =>
    Effect.zipRight(
      sql`UPDATE channel_charges SET status = 'written_off'
          WHERE channel_id = ${id} AND (status IN ('charged', 'kept') OR (status = 'claimed' AND cumulative_after > ${claimedOnChain}))`,
      sql`UPDATE channels SET written_off = written_off + ${amount}, claim_due_at = NULL, updated_at = now() WHERE id = ${id}`
    ).pipe(Effect.asVoid)

  const charges = (channelId: string) =>
    sql<{ requestId: string; amount: string; cumulativeAfter: string; status: string }>`
      SELECT request_id, amount::text, cumulative_after::text, status FROM channel_charges c WHERE c.channel_id = ${channelId}
      ORDER BY c.created_at, c.cumulative_after`

  return {
    insert, find, lock, saveMachine, mirrorBalance, chargeStatement, charge, returnCharge, keep, disputeRefund, channelOfPayment, claim, charges, claimDue, claimedOnChain, settled, writeOff
  } as const
})

export class ChannelsRepo extends Effect.Service<ChannelsRepo>()("channels/Repo", { effect: makeChannelsRepo }) {}
