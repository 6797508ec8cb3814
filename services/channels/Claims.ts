// Claims and settles of batch-settlement channels (docs/settlement.md "Claims, settles and refunds"). A claim pass takes
// up to CLAIM_BATCH_MAX channels of one network (`channel_claim`: what is charged becomes claimed) and sends ONE
// `claimWithSignature` for all of them, signed by our receiver authorizer; its receipt tells each channel's machine
// CLAIMED (or CLAIM_FAILED). A settle then moves everything claimed for the treasury to it in one `settle`; each channel
// whose claimed money it moved gets SETTLED with its part. Every transaction goes through the treasury writer, so the
// treasury worker follows it when its sender stops waiting (rebroadcast, dropped, reorged, finality).
import { SqlClient, type SqlError } from "@effect/sql"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { Clock, Data, Effect, Option } from "effect"
import { BaseError, ContractFunctionRevertedError, getAddress, type Hex, parseEventLogs } from "viem"
import { newId } from "../../src/domain/Ids.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { ChannelClaimsRepo, type ClaimRow } from "./ClaimsRepo.js"
import { batchSettlementAbi, CLAIM_BATCH_MAX, claimArgs, claimCalldata, claimGas, type ClaimLine, SETTLE_GAS, settleCalldata, signClaimBatch } from "./claimTx.js"
import { ChannelFacts } from "./facts.js"
import { type NetworkChannelTerms, ChannelTerms } from "./Terms.js"

export class ChannelClaimError extends Data.TaggedError("ChannelClaimError")<{ readonly message: string }> {}

/** A channel the contract refuses in a claim (named by the revert), or none when the whole claim would go through. */
type Refusal = Option.Option<{ readonly channelId: string | null; readonly reason: string }>

/** Rounds of "simulate, drop the channel the contract refuses" before a pass gives up on the rest. */
const MAX_REFUSALS_PER_PASS = 10

export const claimLineOf = (r: ClaimRow): ClaimLine => ({
  channelId: r.id as Hex,
  config: r,
  maxClaimable: r.voucherMaxClaimable,
  voucherSignature: r.voucherSignature as Hex,
  totalClaimed: r.claimedCumulative
})

export class ChannelClaims extends Effect.Service<ChannelClaims>()("channels/Claims", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const terms = yield* ChannelTerms
    const writers = yield* TreasuryWriter
    const repo = yield* ChannelClaimsRepo
    const facts = yield* ChannelFacts
    const retryAfterMs = terms.claimIntervalSeconds * 1_000
    const contract = getAddress(BATCH_SETTLEMENT_ADDRESS)

    /** The claim as the treasury would send it, simulated at the head: which channel (if any) the contract refuses. */
    const simulate = (t: NetworkChannelTerms, lines: ReadonlyArray<ClaimLine>, signature: Hex): Effect.Effect<Refusal, ChannelClaimError> =>
      Effect.tryPromise({
        try: () => t.chain.publicClient.simulateContract({
          address: contract, abi: batchSettlementAbi, functionName: "claimWithSignature", args: claimArgs(lines, signature), account: t.chain.treasury
        }),
        catch: (e) => e
      }).pipe(
        Effect.as(Option.none()),
        Effect.catchAll((e) => {
          const reverted = e instanceof BaseError ? e.walk((x) => x instanceof ContractFunctionRevertedError) : null
          if (!(reverted instanceof ContractFunctionRevertedError)) {
            return Effect.fail(new ChannelClaimError({ message: `claim simulation failed: ${String(e).slice(0, 300)}` }))
          }
          const name = reverted.data?.errorName ?? reverted.reason ?? "reverted"
          const arg = reverted.data?.args?.[0]
          return Effect.succeed(Option.some({ channelId: typeof arg === "string" ? arg.toLowerCase() : null, reason: name }))
        })
      )

    /** What a mined (or dropped) claim means for the channels it still carries, recorded once, with the treasury row. */
    const recordClaim = (txId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>, network: string) =>
      sql.withTransaction(Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        yield* writers.on(network).recordIn(txId, outcome)
        if (outcome._tag === "Mined" && outcome.receipt.status === "success") {
          const landed = yield* repo.claimLanded(txId)
          for (const c of landed) {
            yield* facts.deliver(c.id, { type: "CLAIMED", at, txHash: outcome.receipt.transactionHash, totalClaimed: c.amount.toString() })
          }
          return landed.length
        }
        // Reverted: the same claim goes again after the interval (an equal totalClaimed is a no-op on chain). Dropped:
        // its nonce went to another transaction; the next pass sends it again at once.
        const reverted = outcome._tag === "Mined"
        const missed = yield* repo.claimMissed(txId, reverted ? new Date(at + retryAfterMs) : null)
        if (reverted) {
          for (const c of missed) yield* facts.deliver(c.id, { type: "CLAIM_FAILED", at, reason: `claim transaction ${outcome.receipt.transactionHash} reverted` })
        }
        return 0
      }))

    /** The channels the contract refuses are left out (CLAIM_FAILED, tried again after the interval). */
    const refuse = (channelIds: ReadonlyArray<string>, reason: string) =>
      sql.withTransaction(Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        yield* repo.release(channelIds, new Date(at + retryAfterMs))
        for (const id of channelIds) yield* facts.deliver(id, { type: "CLAIM_FAILED", at, reason })
      }))

    /**
     * One claim on one network: the due channels (at most CLAIM_BATCH_MAX) in one transaction; how many channels it
     * carried. `scheduled`: every channel with anything unclaimed is due, not only those at the threshold or withdrawing.
     */
    const claimOn = (t: NetworkChannelTerms, scheduled: boolean) =>
      Effect.gen(function* () {
        const writer = writers.on(t.network)
        if (!writer.enabled) return 0
        const now = yield* Clock.currentTimeMillis
        const rows = yield* repo.takeDue({
          network: t.network, authorizer: t.receiverAuthorizer.toLowerCase(), now: new Date(now), scheduled, claimAt: terms.claimAt, limit: CLAIM_BATCH_MAX
        })
        let lines = rows.map(claimLineOf)
        for (let round = 0; lines.length > 0; round++) {
          const signature = yield* Effect.tryPromise({
            try: () => signClaimBatch(t.authorizer, t.chainId, lines),
            catch: (e) => new ChannelClaimError({ message: `signing the claim failed: ${String(e)}` })
          })
          const refusal = yield* simulate(t, lines, signature)
          if (Option.isSome(refusal)) {
            const { channelId, reason } = refusal.value
            // A refusal that names no channel (or too many rounds) concerns them all: they wait for the next interval.
            const out = channelId !== null && round < MAX_REFUSALS_PER_PASS ? lines.filter((l) => l.channelId.toLowerCase() === channelId).map((l) => l.channelId) : []
            const dropped = out.length > 0 ? out : lines.map((l) => l.channelId)
            yield* Effect.logWarning(`channel claim on ${t.network}: the contract refuses ${dropped.length} channel(s) (${reason}); the rest go on`, { channels: dropped.slice(0, 5).join(",") })
            yield* refuse(dropped, `the contract refused the claim: ${reason}`)
            lines = lines.filter((l) => !dropped.includes(l.channelId))
            continue
          }
          const sent = lines
          const tx = yield* writer.submit({
            purpose: "channel_claim",
            subjectId: newId("cclaim"),
            to: contract,
            data: claimCalldata(sent, signature),
            gas: claimGas(sent.length),
            logFields: { channels: String(sent.length) },
            link: (txId) => repo.linkClaim(txId, sent.map((l) => ({ id: l.channelId, totalClaimed: l.totalClaimed })))
          })
          const receipt = yield* writer.awaitReceipt(tx)
          if (Option.isSome(receipt)) yield* recordClaim(tx.id, { _tag: "Mined", receipt: receipt.value }, t.network)
          return sent.length
        }
        return 0
      }).pipe(Effect.withSpan("ChannelClaims.claimOn", { attributes: { network: t.network } }))

    /** What a mined settle means: each channel it carries has its part settled (SETTLED), once. */
    const recordSettle = (txId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>, network: string) =>
      sql.withTransaction(Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        yield* writers.on(network).recordIn(txId, outcome)
        if (outcome._tag !== "Mined" || outcome.receipt.status !== "success") {
          // Nothing moved: the items go, and the next pass builds the settle again.
          yield* repo.settleForgotten(txId)
          return 0n
        }
        // A successful settle leaves the receiver's claimed pool settled: by this transaction, or by anyone's settle
        // before it (settle is permissionless; the money went to the treasury all the same).
        const booked = yield* repo.settleBooked(txId)
        const txHash = outcome.receipt.transactionHash
        const block = outcome.receipt.blockNumber.toString()
        for (const c of booked) {
          yield* facts.deliver(c.id, { type: "SETTLED", at, txHash, amount: c.amount.toString(), unsettled: c.unsettled.toString(), block })
        }
        const attributed = booked.reduce((s, c) => s + c.amount, 0n)
        const moved = parseEventLogs({ abi: batchSettlementAbi, eventName: "Settled", logs: outcome.receipt.logs }).reduce((s, l) => s + l.args.amount, 0n)
        if (booked.length > 0 && moved !== attributed) {
          yield* Effect.logWarning(`channel settle ${txHash} moved ${moved} while the channels it settles claimed ${attributed}`, { txId })
        }
        return attributed
      }))

    /** One settle on one network, when claimed money waits and nothing in flight can change the pool. */
    const settleOn = (t: NetworkChannelTerms) =>
      Effect.gen(function* () {
        const writer = writers.on(t.network)
        if (!writer.enabled) return 0n
        const items = yield* sql.withTransaction(repo.settleDue(t.network))
        if (items.length === 0) return 0n
        const tx = yield* writer.submit({
          purpose: "channel_settle",
          subjectId: newId("csettle"),
          to: contract,
          data: settleCalldata(t.receiver, t.token),
          gas: SETTLE_GAS,
          logFields: { channels: String(items.length) },
          link: (txId) => repo.linkSettle(txId, items)
        })
        const receipt = yield* writer.awaitReceipt(tx)
        return Option.isSome(receipt) ? yield* recordSettle(tx.id, { _tag: "Mined", receipt: receipt.value }, t.network) : 0n
      }).pipe(Effect.withSpan("ChannelClaims.settleOn", { attributes: { network: t.network } }))

    /** One pass over every network offering channels: its claim, then its settle. */
    const pass = (scheduled: boolean) =>
      Effect.forEach(terms.all, (t) =>
        Effect.gen(function* () {
          const claimed = yield* claimOn(t, scheduled)
          const settled = yield* settleOn(t)
          return { network: t.network, claimed, settled }
        }).pipe(
          Effect.catchAll((e) => Effect.as(Effect.logWarning(`channel claims on ${t.network}: ${e.message}; tried again at the next pass`), { network: t.network, claimed: 0, settled: 0n }))
        ))

    /** The treasury worker found a claim's or settle's fate (its sender stopped waiting): recorded for its channels. */
    const resolveTx = (tx: TreasuryTxRow): Effect.Effect<void, SqlError.SqlError | Error> =>
      Effect.gen(function* () {
        const outcome = yield* writers.on(tx.network).observe(tx)
        if (outcome._tag === "Pending") return
        if (tx.purpose === "channel_settle") yield* recordSettle(tx.id, outcome, tx.network)
        else yield* recordClaim(tx.id, outcome, tx.network)
      })

    return { claimOn, settleOn, pass, resolveTx } as const
  }),
  dependencies: [ChannelClaimsRepo.Default, TreasuryWriter.Default, ChannelTerms.Default, ChannelFacts.Live]
}) {}
