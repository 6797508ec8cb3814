// The operator's view of batch-settlement channels: a keyset-paged list (by status, by payer) and one channel with its
// charges and what the contract says of it now. Reads only; amounts in micro-USDC.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { type Hex, parseAbi } from "viem"
import { Networks } from "../../layers/Networks.js"
import { BATCH_SETTLEMENT_ADDRESS, MULTICALL3_ADDRESS } from "../../layers/x402/channelContracts.js"
import { ChannelRow, type ChannelStatus } from "../channels/Repo.js"
import { rowsOf } from "../sql/Rows.js"
import { channelViewsAbi } from "../treasury/channelChainReads.js"
import { decodeTimeCursor, page } from "./cursor.js"

const ListedRow = Schema.extend(ChannelRow, Schema.Struct({ createdKey: Schema.String }))
type ListedRow = typeof ListedRow.Type
const listed = rowsOf(ListedRow)

const ChargeRow = Schema.Struct({
  requestId: Schema.String,
  amount: Schema.BigInt,
  cumulativeAfter: Schema.BigInt,
  voucherMaxClaimable: Schema.BigInt,
  status: Schema.Literal("charged", "returned", "claimed"),
  createdAt: Schema.DateFromSelf,
  returnedAt: Schema.NullOr(Schema.DateFromSelf)
})
const charges = rowsOf(ChargeRow)

/** The machine context's timestamps and counters (ms numbers; absent before the machine wrote them). */
const Context = Schema.Struct({
  withdrawRequestedAt: Schema.optional(Schema.NullOr(Schema.Number)),
  finalizableAt: Schema.optional(Schema.NullOr(Schema.Number)),
  claims: Schema.optional(Schema.Number),
  lastError: Schema.optional(Schema.NullOr(Schema.String))
})
const contextOf = (snapshot: unknown) => {
  const raw = typeof snapshot === "object" && snapshot !== null && "context" in snapshot ? snapshot.context : {}
  return Option.getOrElse(Schema.decodeUnknownOption(Context)(raw), () => ({}))
}
const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString())

export const toOperatorChannel = (row: ChannelRow) => {
  const context: typeof Context.Type = contextOf(row.machineSnapshot)
  return {
    id: row.id,
    network: row.network,
    status: row.status,
    payer: row.payer,
    payerAuthorizer: row.payerAuthorizer,
    receiver: row.receiver,
    token: row.token,
    withdrawDelaySeconds: row.withdrawDelay,
    balance: row.balance.toString(),
    chargedCumulative: row.chargedCumulative.toString(),
    claimedCumulative: row.claimedCumulative.toString(),
    settledCumulative: row.settledCumulative.toString(),
    unclaimed: (row.chargedCumulative - row.claimedCumulative).toString(),
    voucherMaxClaimable: row.voucherMaxClaimable === null ? null : row.voucherMaxClaimable.toString(),
    withdrawRequestedAt: iso(context.withdrawRequestedAt),
    finalizableAt: iso(context.finalizableAt),
    claims: context.claims ?? 0,
    lastError: context.lastError ?? null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString()
  }
}

const moreViewsAbi = parseAbi([
  "function pendingWithdrawals(bytes32 channelId) view returns (uint128 amount, uint40 initiatedAt)",
  "function refundNonce(bytes32 channelId) view returns (uint256)"
])

const isBytes32 = (s: string): s is Hex => /^0x[0-9a-f]{64}$/.test(s)

/** How many charges one channel's page shows (the counts cover all of them). */
const LATEST_CHARGES = 100

export class OperatorChannels extends Effect.Service<OperatorChannels>()("operator/OperatorChannels", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const networks = yield* Networks

    /** Newest first, keyset pages on (created_at, id). */
    const list = (query: { readonly limit: number; readonly cursor?: string | undefined; readonly status?: ChannelStatus | undefined; readonly payer?: string | undefined }) =>
      Effect.gen(function* () {
        const after = yield* decodeTimeCursor(query.cursor)
        const rows = yield* listed(sql`SELECT c.*, c.created_at::text AS created_key FROM channels c WHERE ${sql.and([
          ...(query.status === undefined ? [] : [sql`c.status = ${query.status}`]),
          ...(query.payer === undefined ? [] : [sql`c.payer = ${query.payer.toLowerCase()}`]),
          ...Option.match(after, { onNone: () => [], onSome: (c) => [sql`(c.created_at, c.id) < (${c.at}::timestamptz, ${c.id})`] })
        ])} ORDER BY c.created_at DESC, c.id DESC LIMIT ${query.limit + 1}`).pipe(Effect.orDie)
        const p = page(rows, query.limit, (r: ListedRow) => [r.createdKey, r.id] as const)
        return { items: p.items.map(toOperatorChannel), pagination: p.pagination }
      }).pipe(Effect.withSpan("OperatorChannels.list"))

    /** What the contract says of a channel at the latest block, in one Multicall3 call. */
    const onChain = (network: string, id: Hex, withdrawDelay: number) =>
      Effect.gen(function* () {
        const chain = networks.all.find((c) => c.network === network)
        if (chain === undefined) return yield* Effect.fail(`no chain configured for network ${network}`)
        return yield* Effect.tryPromise({
          try: async () => {
            const block = await chain.publicClient.getBlockNumber({ cacheTime: 0 })
            const at = { address: BATCH_SETTLEMENT_ADDRESS, args: [id] } as const
            const [state, pending, nonce] = await chain.publicClient.multicall({
              contracts: [
                { ...at, abi: channelViewsAbi, functionName: "channels" },
                { ...at, abi: moreViewsAbi, functionName: "pendingWithdrawals" },
                { ...at, abi: moreViewsAbi, functionName: "refundNonce" }
              ],
              allowFailure: false,
              multicallAddress: MULTICALL3_ADDRESS,
              blockNumber: block
            })
            return {
              block: block.toString(),
              balance: state[0].toString(),
              totalClaimed: state[1].toString(),
              refundNonce: nonce.toString(),
              pendingWithdrawal: pending[1] === 0
                ? null
                : { amount: pending[0].toString(), initiatedAt: iso(pending[1] * 1000) ?? "", finalizableAt: iso((pending[1] + withdrawDelay) * 1000) ?? "" }
            }
          },
          catch: (e) => `the chain did not answer: ${String(e).slice(0, 200)}`
        })
      })

    /** One channel: the row, its charges, and the contract's view of it (none when the chain does not answer). */
    const detail = (id: string) =>
      Effect.gen(function* () {
        const [row] = yield* rowsOf(ChannelRow)(sql`SELECT * FROM channels WHERE id = ${id.toLowerCase()}`).pipe(Effect.orDie)
        if (row === undefined) return Option.none()
        const [counts, latest] = yield* Effect.all([
          sql<{ status: string; n: number }>`SELECT status, count(*)::int AS n FROM channel_charges WHERE channel_id = ${row.id} GROUP BY status`,
          charges(sql`SELECT request_id, amount, cumulative_after, voucher_max_claimable, status, created_at, returned_at FROM channel_charges
                      WHERE channel_id = ${row.id} ORDER BY created_at DESC, cumulative_after DESC LIMIT ${LATEST_CHARGES}`)
        ]).pipe(Effect.orDie)
        const count = (status: string) => counts.find((c) => c.status === status)?.n ?? 0
        const id32 = row.id
        const chainState = yield* Effect.either(isBytes32(id32) ? onChain(row.network, id32, row.withdrawDelay) : Effect.fail("not a channel id"))
        return Option.some({
          channel: toOperatorChannel(row),
          charges: {
            counts: { charged: count("charged"), returned: count("returned"), claimed: count("claimed") },
            latest: latest.map((c) => ({
              requestId: c.requestId,
              amount: c.amount.toString(),
              cumulativeAfter: c.cumulativeAfter.toString(),
              voucherMaxClaimable: c.voucherMaxClaimable.toString(),
              status: c.status,
              createdAt: c.createdAt.toISOString(),
              returnedAt: c.returnedAt === null ? null : c.returnedAt.toISOString()
            }))
          },
          onChain: chainState._tag === "Right" ? chainState.right : null,
          onChainError: chainState._tag === "Left" ? chainState.left : null
        })
      }).pipe(Effect.withSpan("OperatorChannels.detail"))

    return { list, detail } as const
  })
}) {}
