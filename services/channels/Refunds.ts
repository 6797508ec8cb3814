// Cooperative refunds of batch-settlement channels: the payer asks (a `refund` payload, its zero-charge voucher verified
// by the pipeline), we first claim everything charged on the channel and then sign `refundWithSignature` for the
// channel's current refund nonce, both in one transaction (`multicall`), so a refund can never take charged money.
// The receipt tells the channel's machine REFUNDED; the caller gets the transaction, what went back and what is left.
import { SqlClient } from "@effect/sql"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { Clock, Data, Effect, Option } from "effect"
import { getAddress, type Hex, parseEventLogs, type TransactionReceipt } from "viem"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { ChannelClaims, claimLineOf } from "./Claims.js"
import { batchSettlementAbi, REFUND_GAS, refundCalldata, signClaimBatch, signRefund, UINT128_MAX } from "./claimTx.js"
import { ChannelFacts } from "./facts.js"
import { ChannelRefundsRepo } from "./RefundsRepo.js"
import { ChannelTerms, type NetworkChannelTerms } from "./Terms.js"

export class ChannelRefundError extends Data.TaggedError("ChannelRefundError")<{
  readonly reason: "unknown_channel" | "not_offered" | "busy" | "refused" | "reverted" | "pending" | "chain"
  readonly message: string
}> {}

export interface RefundResult {
  readonly txHash: string
  readonly refunded: bigint
  readonly channelBalanceAfter: bigint
}

/** How long claim passes leave a channel alone while its refund is built and sent. */
const HOLD_MS = 120_000
/** Extra gas for the claim that goes before the refund. */
const CLAIM_IN_REFUND_GAS = 90_000n

export class ChannelRefunds extends Effect.Service<ChannelRefunds>()("channels/Refunds", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const terms = yield* ChannelTerms
    const writers = yield* TreasuryWriter
    const claims = yield* ChannelClaims
    const repo = yield* ChannelRefundsRepo
    const facts = yield* ChannelFacts
    const contract = getAddress(BATCH_SETTLEMENT_ADDRESS)
    const chainError = (what: string) => (e: unknown) => new ChannelRefundError({ reason: "chain", message: `${what}: ${String(e).slice(0, 300)}` })

    /** The refund's fate, recorded once; what it moved, read from its receipt and the channel at its block. */
    const record = (t: NetworkChannelTerms, txId: string, channelId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>) =>
      Effect.gen(function* () {
        const receipt: TransactionReceipt | undefined = outcome._tag === "Mined" && outcome.receipt.status === "success" ? outcome.receipt : undefined
        const balanceAfter = receipt === undefined ? 0n : (yield* Effect.tryPromise({
          try: () => t.chain.publicClient.readContract({
            address: contract, abi: batchSettlementAbi, functionName: "channels", args: [channelId as Hex], blockNumber: receipt.blockNumber
          }),
          catch: chainError("reading the channel after its refund")
        }))[0]
        return yield* sql.withTransaction(Effect.gen(function* () {
          const at = yield* Clock.currentTimeMillis
          yield* writers.on(t.network).recordIn(txId, outcome)
          if (receipt === undefined) {
            yield* repo.missed(txId)
            return Option.none<RefundResult>()
          }
          const refunded = parseEventLogs({ abi: batchSettlementAbi, eventName: "Refunded", logs: receipt.logs })
            .filter((l) => l.args.channelId.toLowerCase() === channelId.toLowerCase())
            .reduce((s, l) => s + l.args.amount, 0n)
          const done = yield* repo.landed(txId, refunded, balanceAfter)
          if (Option.isSome(done)) {
            const txHash = receipt.transactionHash
            if (done.value.totalClaimed !== null) {
              yield* facts.deliver(channelId, { type: "CLAIMED", at, txHash, totalClaimed: done.value.claimedOnChain.toString() })
            }
            if (refunded > 0n) {
              // What stays unclaimed in the channel after the refund: more than nothing, and the refund was partial.
              const left = balanceAfter > done.value.claimedOnChain ? balanceAfter - done.value.claimedOnChain : 0n
              yield* facts.deliver(channelId, {
                type: "REFUNDED", at, txHash, amount: refunded.toString(), unsettled: done.value.unsettled.toString(),
                balance: balanceAfter.toString(), left: left.toString()
              })
            }
          }
          return Option.some({ txHash: receipt.transactionHash, refunded, channelBalanceAfter: balanceAfter })
        }))
      })

    /**
     * Refunds `amount` (everything unclaimed when undefined) of the channel to its payer, after claiming what is charged
     * on it; waits for the receipt. A claim of the channel in flight is followed to its fate first.
     */
    const refund = (channelId: string, amount: bigint | undefined) =>
      Effect.gen(function* () {
        const id = channelId.toLowerCase()
        const now = yield* Clock.currentTimeMillis
        let taken = yield* repo.take(id, new Date(now + HOLD_MS))
        if (Option.isNone(taken)) return yield* new ChannelRefundError({ reason: "unknown_channel", message: `no channel ${id} we can refund` })
        const t = Option.getOrUndefined(terms.on(taken.value.network))
        if (t === undefined) return yield* new ChannelRefundError({ reason: "not_offered", message: `channels are not offered on ${taken.value.network}` })
        const writer = writers.on(t.network)
        if (taken.value.claimTxId !== null) {
          const inFlight = yield* writer.find(taken.value.claimTxId).pipe(Effect.mapError(chainError("reading the claim in flight")))
          if (Option.isSome(inFlight)) yield* claims.resolveTx(inFlight.value).pipe(Effect.mapError(chainError("following the claim in flight")))
          taken = yield* repo.take(id, new Date(now + HOLD_MS))
          if (Option.isSome(taken) && taken.value.claimTxId !== null) {
            yield* repo.release(id)
            return yield* new ChannelRefundError({ reason: "busy", message: "a claim of this channel is still in flight; ask again shortly" })
          }
        }
        if (Option.isNone(taken)) return yield* new ChannelRefundError({ reason: "unknown_channel", message: `no channel ${id} we can refund` })
        const row = taken.value
        const nonce = yield* Effect.tryPromise({
          try: () => t.chain.publicClient.readContract({ address: contract, abi: batchSettlementAbi, functionName: "refundNonce", args: [id as Hex] }),
          catch: chainError("reading the refund nonce")
        })
        const state = yield* Effect.tryPromise({
          try: () => t.chain.publicClient.readContract({ address: contract, abi: batchSettlementAbi, functionName: "channels", args: [id as Hex] }),
          catch: chainError("reading the channel")
        })
        const line = claimLineOf(row)
        const claimedAfter = row.claimedCumulative > state[1] ? row.claimedCumulative : state[1]
        if (state[0] <= claimedAfter) {
          yield* repo.release(id)
          return yield* new ChannelRefundError({ reason: "refused", message: "nothing in the channel is left to refund: everything in it is claimed" })
        }
        const claim = row.claimedCumulative > row.claimedOnChain
          ? { line, signature: yield* Effect.tryPromise({ try: () => signClaimBatch(t.authorizer, t.chainId, [line]), catch: chainError("signing the claim") }) }
          : undefined
        const asked = amount ?? UINT128_MAX
        const refundSignature = yield* Effect.tryPromise({ try: () => signRefund(t.authorizer, t.chainId, id as Hex, nonce, asked), catch: chainError("signing the refund") })
        const data = refundCalldata({ config: row, amount: asked, nonce, refundSignature, claim })
        // Validation before anything is signed into the nonce sequence: a refund the contract refuses is not sent.
        const simulated = yield* Effect.either(Effect.tryPromise(() => t.chain.publicClient.call({ account: t.chain.treasury, to: contract, data })))
        if (simulated._tag === "Left") {
          yield* repo.release(id)
          return yield* new ChannelRefundError({ reason: "refused", message: `the contract refuses the refund: ${String(simulated.left.error).slice(0, 300)}` })
        }
        const tx = yield* writer.submit({
          purpose: "channel_refund",
          subjectId: id,
          to: contract,
          data,
          gas: REFUND_GAS + (claim === undefined ? 0n : CLAIM_IN_REFUND_GAS),
          logFields: { channel: id, amount: amount ?? null },
          link: (txId) => repo.link(txId, { channelId: id, amountAsked: amount ?? null, nonce, totalClaimed: claim === undefined ? null : line.totalClaimed })
        }).pipe(Effect.mapError(chainError("sending the refund")))
        const receipt = yield* writer.awaitReceipt(tx)
        if (Option.isNone(receipt)) {
          return yield* new ChannelRefundError({ reason: "pending", message: `refund ${tx.txHash} sent; its receipt has not come yet` })
        }
        const result = yield* record(t, tx.id, id, { _tag: "Mined", receipt: receipt.value })
        if (Option.isNone(result)) return yield* new ChannelRefundError({ reason: "reverted", message: `refund ${tx.txHash} reverted: nothing moved` })
        return result.value
      }).pipe(Effect.withSpan("ChannelRefunds.refund"))

    /** The treasury worker found a refund's fate (its sender stopped waiting). */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const t = Option.getOrUndefined(terms.on(tx.network))
        const outcome = yield* writers.on(tx.network).observe(tx)
        if (outcome._tag === "Pending") return
        if (t === undefined) return yield* writers.on(tx.network).recordIn(tx.id, outcome).pipe(sql.withTransaction, Effect.asVoid)
        yield* record(t, tx.id, tx.subjectId, outcome)
      })

    return { refund, resolveTx } as const
  }),
  dependencies: [ChannelRefundsRepo.Default, ChannelClaims.Default, TreasuryWriter.Default, ChannelTerms.Default, ChannelFacts.Live]
}) {}
