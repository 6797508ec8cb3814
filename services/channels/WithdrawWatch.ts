// The withdrawal watch: x402BatchSettlement's WithdrawInitiated and WithdrawFinalized logs for the channels we hold,
// read from a stored cursor up to the last final block (the chain's confirmations), in bounded ranges. A started
// withdrawal is delivered as WITHDRAW_INITIATED and makes the channel due for a claim at once (the claim must land
// before the payer can finalize); a finalized one as WITHDRAW_FINALIZED.
import { SqlClient } from "@effect/sql"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { Clock, Data, Effect, Schema } from "effect"
import { getAbiItem, getAddress } from "viem"
import { finalBlock } from "../../layers/confirmations.js"
import { rowsOf } from "../sql/Rows.js"
import { batchSettlementAbi } from "./claimTx.js"
import { ChannelFacts } from "./facts.js"
import type { NetworkChannelTerms } from "./Terms.js"

/** Blocks per log query (providers cap eth_getLogs ranges; 2,000 is under every public provider's cap). */
export const WATCH_RANGE_BLOCKS = 2_000n
/** A range answering more logs than this is halved (a provider's answer size is bounded too). */
export const WATCH_MAX_LOGS = 1_000
/** Ranges per pass: a watch far behind catches up over several passes. */
const RANGES_PER_PASS = 5
/** Where a network's first pass starts, below the final block: longer than the longest withdrawal delay we offer at 2 s blocks. */
export const WATCH_FIRST_LOOKBACK = 1_300_000n

export class WatchError extends Data.TaggedError("WatchError")<{ readonly message: string }> {}

const ours = rowsOf(Schema.Struct({ id: Schema.String, withdrawDelay: Schema.Number, unsettled: Schema.BigInt }))
const events = [getAbiItem({ abi: batchSettlementAbi, name: "WithdrawInitiated" }), getAbiItem({ abi: batchSettlementAbi, name: "WithdrawFinalized" })]

export const makeWithdrawWatch = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const facts = yield* ChannelFacts
  const contract = getAddress(BATCH_SETTLEMENT_ADDRESS)

  const logsIn = (t: NetworkChannelTerms, fromBlock: bigint, toBlock: bigint) =>
    Effect.tryPromise({
      try: () => t.chain.publicClient.getLogs({ address: contract, events, fromBlock, toBlock, strict: true }),
      catch: (e) => new WatchError({ message: `logs ${fromBlock}-${toBlock} on ${t.network}: ${String(e).slice(0, 300)}` })
    })

  /** The logs of [from, to], halving the range while it answers too many (or the provider refuses its size). */
  const boundedLogs = (t: NetworkChannelTerms, from: bigint, to: bigint) =>
    Effect.gen(function* () {
      let end = to
      for (;;) {
        const answer = yield* Effect.either(logsIn(t, from, end))
        if (answer._tag === "Right" && answer.right.length <= WATCH_MAX_LOGS) return { logs: answer.right, to: end }
        if (end === from) {
          if (answer._tag === "Left") return yield* answer.left
          return yield* new WatchError({ message: `block ${from} on ${t.network} holds ${answer.right.length} withdrawal logs, above ${WATCH_MAX_LOGS}` })
        }
        end = from + (end - from) / 2n
      }
    })

  /** One range's logs for our channels, delivered with the cursor's move in one transaction; how many withdrawals started. */
  const apply = (t: NetworkChannelTerms, logs: Effect.Effect.Success<ReturnType<typeof logsIn>>, next: bigint) =>
    sql.withTransaction(Effect.gen(function* () {
      const ids = [...new Set(logs.map((l) => l.args.channelId.toLowerCase()))]
      const known = ids.length === 0 ? [] : yield* ours(sql`
        SELECT id, withdraw_delay, claimed_on_chain - settled_cumulative AS unsettled FROM channels
        WHERE network = ${t.network} AND id IN ${sql.in(ids)} FOR UPDATE`)
      const byId = new Map(known.map((c) => [c.id, c]))
      const at = yield* Clock.currentTimeMillis
      let started = 0
      for (const log of logs) {
        const channel = byId.get(log.args.channelId.toLowerCase())
        if (channel === undefined) continue
        if (log.eventName === "WithdrawInitiated") {
          const finalizableAt = (log.args.initiatedAt + channel.withdrawDelay) * 1_000
          // The machine sets the claim due at once (claim_due_at); a refused claim's back-off does not delay it.
          yield* sql`UPDATE channels SET claim_next_at = NULL, updated_at = now() WHERE id = ${channel.id}`
          yield* facts.deliver(channel.id, { type: "WITHDRAW_INITIATED", at, finalizableAt })
          started++
        } else {
          yield* facts.deliver(channel.id, {
            type: "WITHDRAW_FINALIZED", at, txHash: log.transactionHash, amount: log.args.amount.toString(), unsettled: channel.unsettled.toString()
          })
        }
      }
      yield* sql`INSERT INTO channel_watch_cursors (network, next_block) VALUES (${t.network}, ${next})
                 ON CONFLICT (network) DO UPDATE SET next_block = EXCLUDED.next_block, updated_at = now()`
      return started
    }))

  /** One pass on one network: up to RANGES_PER_PASS ranges from the cursor to the last final block. */
  const pass = (t: NetworkChannelTerms) =>
    Effect.gen(function* () {
      const head = yield* Effect.tryPromise({
        try: () => t.chain.publicClient.getBlockNumber({ cacheTime: 0 }),
        catch: (e) => new WatchError({ message: `head of ${t.network}: ${String(e).slice(0, 200)}` })
      })
      const safe = finalBlock(head, t.chain.confirmations)
      const stored = yield* sql<{ nextBlock: string }>`SELECT next_block::text FROM channel_watch_cursors WHERE network = ${t.network}`
      let from = stored[0] === undefined ? (safe > WATCH_FIRST_LOOKBACK ? safe - WATCH_FIRST_LOOKBACK : 0n) : BigInt(stored[0].nextBlock)
      let started = 0
      for (let i = 0; i < RANGES_PER_PASS && from <= safe; i++) {
        const to = from + WATCH_RANGE_BLOCKS - 1n < safe ? from + WATCH_RANGE_BLOCKS - 1n : safe
        const range = yield* boundedLogs(t, from, to)
        started += yield* apply(t, range.logs, range.to + 1n)
        from = range.to + 1n
      }
      return started
    }).pipe(Effect.withSpan("WithdrawWatch.pass", { attributes: { network: t.network } }))

  return { pass } as const
})

export class WithdrawWatch extends Effect.Service<WithdrawWatch>()("channels/WithdrawWatch", {
  effect: makeWithdrawWatch,
  dependencies: [ChannelFacts.Live]
}) {}
