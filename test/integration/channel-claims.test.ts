// Claims, settles, cooperative refunds and the withdrawal watch of batch-settlement channels, on a devnet of the test's
// own (CHAIN_CONFIRMATIONS = 2, so a reorg can take a claim out before it is final) and the real PostgreSQL: channels
// opened with the official client's deposits, charged on the payer's vouchers, claimed in one transaction, settled into
// the treasury; the ledger equals the chain after it.
import { expect, layer } from "@effect/vitest"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { Effect, Layer, Option, TestClock } from "effect"
import type { Hex } from "viem"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { ChannelClaims } from "../../services/channels/Claims.js"
import { Deposits } from "../../services/channels/Deposits.js"
import { claimGas } from "../../services/channels/claimTx.js"
import { makeChannelTick } from "../../services/channels/ClaimsWorker.js"
import { ChannelsRepo } from "../../services/channels/Repo.js"
import { ChannelRefunds } from "../../services/channels/Refunds.js"
import { ChannelTerms } from "../../services/channels/Terms.js"
import { WithdrawWatch } from "../../services/channels/WithdrawWatch.js"
import { Accounts } from "../../services/ledger/Ledger.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { bigints } from "../support/channelChain.js"
import { officialBatchSettlementAbi } from "../support/x402Official.js"
import { ChannelClaimsApp, charge, ledgerBalance, onChain, openChannel, OwnChannelChain } from "../support/channelClaims.js"
import { channelConfig, signedDeposit } from "../support/channelDeposits.js"
import { TestEnv } from "../support/harness.js"

const App = ChannelsRepo.Default.pipe(Layer.provideMerge(ChannelClaimsApp(2)))

/** Our clock starts at the real time (the machine's deadlines are compared with the database's), then only tests move it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** The network's name as rows record it ("base-sepolia" on this devnet). */
const NAME = "base-sepolia"
const terms = Effect.map(ChannelTerms, (t) => Option.getOrThrow(t.on(NAME)))
const row = (id: string) => Effect.flatMap(ChannelsRepo, (r) => Effect.map(r.find(id), Option.getOrThrow))
const treasuryUsdc = Effect.flatMap(OwnChannelChain, (c) =>
  Effect.promise(() => c.publicClient.readContract({ address: c.usdc, abi: usdcAbi, functionName: "balanceOf", args: [c.devnet.accounts[0]!.address] })))
const txsOf = (purpose: string) =>
  Effect.flatMap(TestEnv, ({ sql }) => sql<{ id: string; txHash: string; state: string }>`SELECT id, tx_hash, state FROM treasury_txs WHERE purpose = ${purpose} ORDER BY nonce`)
/** The receivable is what the rows say is charged and neither settled nor written off, over every channel. */
const receivableMatchesRows = Effect.gen(function* () {
  const { sql } = yield* TestEnv
  const [sums] = yield* sql<{ open: string }>`SELECT coalesce(sum(charged_cumulative - settled_cumulative - written_off), 0)::text AS open FROM channels`
  expect(yield* ledgerBalance(Accounts.channelReceivable)).toBe(BigInt(sums!.open))
})
/** The payer's call to x402BatchSettlement (initiateWithdraw, finalizeWithdraw): its receipt, or the revert. */
const payerCalls = (functionName: string, args: ReadonlyArray<unknown>) =>
  Effect.flatMap(OwnChannelChain, (c) =>
    Effect.tryPromise(async () =>
      c.mined(await c.walletOf(c.payer).writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName, args }))))

layer(App, { timeout: 240_000 })("channel claims and settles", (it) => {
  it.effect("130 channels' vouchers go in ONE claim transaction, a settle moves their sum to the treasury, and the ledger equals the chain", () =>
    Effect.gen(function* () {
      yield* realNow
      const claims = yield* ChannelClaims
      const treasuryOnChainBefore = yield* treasuryUsdc
      const treasuryLedgerBefore = yield* ledgerBalance(Accounts.treasury)
      const channels = []
      for (let i = 0; i < 130; i++) channels.push(yield* openChannel(`many-${i}`, 20_000n))
      let total = 0n
      for (const [i, ch] of channels.entries()) {
        const amount = 1_000n + BigInt(i)
        yield* charge(ch, `req_many_${i}`, amount)
        total += amount
      }
      const [result] = yield* claims.pass(true)
      expect(result).toEqual({ network: NAME, claimed: 130, settled: total })
      const claimTxs = yield* txsOf("channel_claim")
      expect(claimTxs).toHaveLength(1)
      // The gas the writer gives a claim covers what it used (measured: 3.41M for these 130 first claims, ≈ 26k each).
      const receipt = yield* Effect.flatMap(OwnChannelChain, (c) => Effect.promise(() => c.publicClient.getTransactionReceipt({ hash: claimTxs[0]!.txHash as Hex })))
      expect(receipt.gasUsed).toBeLessThan(claimGas(130))
      expect(yield* txsOf("channel_settle")).toHaveLength(1)
      for (const [i, ch] of channels.entries()) {
        expect((yield* onChain(ch.id)).totalClaimed).toBe(1_000n + BigInt(i))
        const r = yield* row(ch.id)
        expect({ status: r.status, claimedOnChain: r.claimedOnChain, settled: r.settledCumulative }).toEqual({ status: "open", claimedOnChain: r.chargedCumulative, settled: r.chargedCumulative })
      }
      // Ledger = chain: the treasury got exactly what its ledger account got; nothing charged is left receivable.
      expect((yield* treasuryUsdc) - treasuryOnChainBefore).toBe(total)
      expect((yield* ledgerBalance(Accounts.treasury)) - treasuryLedgerBefore).toBe(total)
      expect(yield* ledgerBalance(Accounts.channelReceivable)).toBe(0n)
      // The settle's bookings carry its block: a reconciliation at an earlier (final) block does not count them yet.
      const { sql } = yield* TestEnv
      const bookedAt = yield* sql<{ chainBlock: string | null }>`SELECT DISTINCT t.chain_block::text AS chain_block FROM ledger_transfers t
        WHERE t.kind = 'channel_settle' AND t.tx_hash = ${(yield* txsOf("channel_settle"))[0]!.txHash}`
      const settleReceipt = yield* Effect.flatMap(OwnChannelChain, (c) =>
        Effect.flatMap(txsOf("channel_settle"), (txs) => Effect.promise(() => c.publicClient.getTransactionReceipt({ hash: txs[0]!.txHash as Hex }))))
      expect(bookedAt).toEqual([{ chainBlock: settleReceipt.blockNumber.toString() }])
      // Nothing new: the next pass sends nothing.
      expect(yield* claims.pass(true)).toEqual([{ network: NAME, claimed: 0, settled: 0n }])
    }))

  it.effect("a payer's withdrawal is seen by the watch and our claim lands before the payer can finalize; what was claimed stays ours", () =>
    Effect.gen(function* () {
      yield* realNow
      const c = yield* OwnChannelChain
      const claims = yield* ChannelClaims
      const watch = yield* WithdrawWatch
      const t = yield* terms
      const ch = yield* openChannel("withdraw", 50_000n)
      yield* charge(ch, "req_w_1", 7_000n)
      yield* charge(ch, "req_w_2", 3_000n)
      // Charges under the threshold and no schedule: nothing is claimed yet.
      expect(yield* claims.claimOn(t, false)).toBe(0)
      yield* payerCalls("initiateWithdraw", [ch.config, 50_000n])
      yield* Effect.promise(() => c.testClient.mine({ blocks: 2 }))
      expect(yield* watch.pass(t)).toBe(1)
      expect((yield* row(ch.id)).status).toBe("withdrawing")
      // Not the schedule: the withdrawal makes the claim due at once.
      expect(yield* claims.claimOn(t, false)).toBe(1)
      expect(yield* onChain(ch.id)).toEqual({ balance: 50_000n, totalClaimed: 10_000n })
      // The payer cannot finalize yet; once the delay has passed, only the unclaimed 40,000 goes back.
      const early = yield* Effect.either(payerCalls("finalizeWithdraw", [ch.config]))
      expect(early._tag).toBe("Left")
      yield* Effect.promise(() => c.testClient.increaseTime({ seconds: 901 }))
      const payerBefore = yield* Effect.promise(() => c.usdcBalance(c.payer.address))
      yield* payerCalls("finalizeWithdraw", [ch.config])
      expect((yield* Effect.promise(() => c.usdcBalance(c.payer.address))) - payerBefore).toBe(40_000n)
      yield* Effect.promise(() => c.testClient.mine({ blocks: 2 }))
      expect(yield* watch.pass(t)).toBe(0)
      const after = yield* row(ch.id)
      expect(after.status).toBe("drained")
      expect(after.writtenOff).toBe(0n)
      expect(yield* ledgerBalance("channel_losses")).toBe(0n)
      // The claimed money settles into the treasury and the channel closes.
      expect(yield* claims.settleOn(t)).toBe(10_000n)
      expect((yield* row(ch.id)).status).toBe("closed")
    }))

  it.effect("a cooperative refund claims what is charged first and returns exactly the unclaimed balance", () =>
    Effect.gen(function* () {
      yield* realNow
      const c = yield* OwnChannelChain
      const refunds = yield* ChannelRefunds
      const ch = yield* openChannel("refund", 10_000n)
      yield* charge(ch, "req_r_1", 2_500n)
      const payerBefore = yield* Effect.promise(() => c.usdcBalance(c.payer.address))
      const result = yield* refunds.refund(ch.id, undefined)
      expect(result.refunded).toBe(7_500n)
      expect(result.channelBalanceAfter).toBe(2_500n)
      expect((yield* Effect.promise(() => c.usdcBalance(c.payer.address))) - payerBefore).toBe(7_500n)
      expect(yield* onChain(ch.id)).toEqual({ balance: 2_500n, totalClaimed: 2_500n })
      const r = yield* row(ch.id)
      expect({ status: r.status, claimedOnChain: r.claimedOnChain, writtenOff: r.writtenOff }).toEqual({ status: "drained", claimedOnChain: 2_500n, writtenOff: 0n })
      // 2,500 claimed, not yet settled: still receivable, and the ledger says so.
      yield* receivableMatchesRows
      const [refundTx] = yield* txsOf("channel_refund")
      expect(refundTx?.txHash).toBe(result.txHash)
      // A second refund finds nothing left to give back: refused, and no transaction is sent.
      const again = yield* Effect.flip(refunds.refund(ch.id, undefined))
      expect(again).toMatchObject({ _tag: "ChannelRefundError", reason: "refused" })
      expect(yield* txsOf("channel_refund")).toHaveLength(1)
    }))

  it.effect("a channel opened by the deposit path is claimed: the deposit stored the salt and receiver authorizer a claim submits", () =>
    Effect.gen(function* () {
      yield* realNow
      const c = yield* OwnChannelChain
      const claims = yield* ChannelClaims
      const deposits = yield* Deposits
      const t = yield* terms
      const config = channelConfig(t, c.payer, "via-deposit")
      const opened = yield* deposits.deposit(yield* signedDeposit(t, c.payer, config, 6_000n))
      expect(opened.status).toBe("open")
      const ch = { id: opened.id, config }
      yield* charge(ch, "req_d_1", 2_000n)
      expect(yield* claims.claimOn(t, true)).toBe(1)
      expect(yield* onChain(ch.id)).toEqual({ balance: 6_000n, totalClaimed: 2_000n })
    }))

  it.effect("a channel whose unclaimed charges reach the threshold is claimed without waiting for the schedule; one below it waits", () =>
    Effect.gen(function* () {
      yield* realNow
      const claims = yield* ChannelClaims
      const t = yield* terms
      const claimAt = (yield* ChannelTerms).claimAt
      const below = yield* openChannel("threshold-below", claimAt * 2n)
      const at = yield* openChannel("threshold-at", claimAt * 2n)
      yield* charge(below, "req_t_below", claimAt - 1n)
      yield* charge(at, "req_t_at_1", claimAt - 1n)
      yield* charge(at, "req_t_at_2", 1n)
      expect(yield* claims.claimOn(t, false)).toBe(1)
      expect((yield* onChain(at.id)).totalClaimed).toBe(claimAt)
      expect((yield* onChain(below.id)).totalClaimed).toBe(0n)
      // The schedule takes the rest.
      expect(yield* claims.claimOn(t, true)).toBe(1)
      expect((yield* onChain(below.id)).totalClaimed).toBe(claimAt - 1n)
    }))

  it.effect("the worker's tick claims everything unclaimed once per claim interval, and in between only what is due", () =>
    Effect.gen(function* () {
      yield* realNow
      const tick = yield* makeChannelTick
      const ch = yield* openChannel("schedule", 9_000n)
      yield* charge(ch, "req_s_1", 1_000n)
      // The first tick is the schedule's.
      yield* tick
      expect((yield* onChain(ch.id)).totalClaimed).toBe(1_000n)
      yield* charge(ch, "req_s_2", 1_000n)
      yield* TestClock.adjust("30 seconds")
      yield* tick
      expect((yield* onChain(ch.id)).totalClaimed).toBe(1_000n)
      yield* TestClock.adjust("30 seconds")
      yield* tick
      expect((yield* onChain(ch.id)).totalClaimed).toBe(2_000n)
    }))

  it.effect("a channel whose voucher the contract refuses is left out (claim failed, tried again later) and the others are claimed in one transaction", () =>
    Effect.gen(function* () {
      yield* realNow
      const c = yield* OwnChannelChain
      const { sql } = yield* TestEnv
      const claims = yield* ChannelClaims
      const t = yield* terms
      const good = [yield* openChannel("refuse-a", 9_000n), yield* openChannel("refuse-b", 9_000n)]
      const bad = yield* openChannel("refuse-c", 9_000n)
      for (const ch of [...good, bad]) yield* charge(ch, `req_${ch.id.slice(2, 10)}`, 1_500n)
      // The stored voucher of one channel is not its payer's (signed by another key): the contract would revert the batch.
      const forged = yield* Effect.promise(() => c.claimRow(bad.config, 1_500n, 1_500n, c.relayer))
      yield* sql`UPDATE channels SET voucher_signature = ${forged.signature.toLowerCase()} WHERE id = ${bad.id}`
      const before = (yield* txsOf("channel_claim")).length
      expect(yield* claims.claimOn(t, true)).toBe(2)
      expect((yield* txsOf("channel_claim")).length).toBe(before + 1)
      for (const ch of good) expect((yield* onChain(ch.id)).totalClaimed).toBe(1_500n)
      expect((yield* onChain(bad.id)).totalClaimed).toBe(0n)
      const refused = yield* row(bad.id)
      expect(refused.status).toBe("claimFailed")
      // Not again before the interval: its take stays, the next claim after the back-off carries it.
      expect(yield* claims.claimOn(t, true)).toBe(0)
      expect(refused.claimedCumulative).toBe(1_500n)
    }))

  it.effect("a claim whose receipt comes after its sender stopped waiting is recorded by the treasury worker, once", () =>
    Effect.gen(function* () {
      yield* realNow
      const c = yield* OwnChannelChain
      const claims = yield* ChannelClaims
      const worker = yield* TreasuryWorker
      const t = yield* terms
      const ch = yield* openChannel("late", 8_000n)
      yield* charge(ch, "req_l_1", 3_000n)
      yield* Effect.promise(() => c.testClient.setAutomine(false))
      // Sent, not mined within the wait: the pass leaves it to the worker.
      const sent = yield* claims.claimOn(t, true).pipe(Effect.ensuring(Effect.promise(() => c.testClient.setAutomine(true))))
      expect(sent).toBe(1)
      expect((yield* row(ch.id)).claimedOnChain).toBe(0n)
      yield* Effect.promise(() => c.testClient.mine({ blocks: 1 }))
      yield* TestClock.adjust("31 seconds")
      yield* worker.processDue
      const r = yield* row(ch.id)
      expect({ claimedOnChain: r.claimedOnChain, charged: r.chargedCumulative }).toEqual({ claimedOnChain: 3_000n, charged: 3_000n })
      expect((yield* onChain(ch.id)).totalClaimed).toBe(3_000n)
      // Nothing is left in flight, and a second look books nothing twice.
      const { sql } = yield* TestEnv
      expect(yield* sql`SELECT id FROM channels WHERE id = ${ch.id} AND claim_tx_id IS NOT NULL`).toEqual([])
      yield* TestClock.adjust("31 seconds")
      yield* worker.processDue
      expect((yield* row(ch.id)).claimedOnChain).toBe(3_000n)
    }))

  it.effect("a claim a reorg takes out before it is final is sent again from its stored bytes and included again", () =>
    Effect.gen(function* () {
      yield* realNow
      const c = yield* OwnChannelChain
      const claims = yield* ChannelClaims
      const worker = yield* TreasuryWorker
      const t = yield* terms
      const ch = yield* openChannel("reorg", 30_000n)
      yield* charge(ch, "req_g_1", 4_000n)
      expect(yield* claims.claimOn(t, true)).toBe(1)
      expect((yield* onChain(ch.id)).totalClaimed).toBe(4_000n)
      // The block holding the claim is replaced by an empty one.
      yield* Effect.promise(() => c.testClient.request({ method: "anvil_reorg" as never, params: [1, []] as never }))
      expect((yield* onChain(ch.id)).totalClaimed).toBe(0n)
      // The treasury's finality follower sees it gone and sends the same bytes again.
      yield* worker.processDue
      expect((yield* onChain(ch.id)).totalClaimed).toBe(4_000n)
      yield* Effect.promise(() => c.testClient.mine({ blocks: 2 }))
      yield* worker.processDue
      const rows = yield* txsOf("channel_claim")
      expect(rows[rows.length - 1]?.state).toBe("confirmed")
      expect(bigints(yield* Effect.promise(() => c.read("channels", [ch.id as Hex])), 2)).toEqual([30_000n, 4_000n])
      yield* receivableMatchesRows
    }))
})
