// Disputes on channel-paid calls (docs/settlement.md "Disputes on channel calls"): resolved for the client before any
// claim took the call's charge, the client's share comes off the charge and off the channel's charged total through the
// ledger, in the resolution's transaction (the payer's channel balance keeps it; the next claim takes less); once a claim
// took the charge, the share goes to the payer's wallet through the refund path. Chain, rows and ledger agree to the
// micro-USDC.
import { expect, layer } from "@effect/vitest"
import { Effect, Option, TestClock } from "effect"
import type { Hex } from "viem"
import { BATCH_SETTLEMENT_ADDRESS } from "../../layers/x402/channelContracts.js"
import { MachineHost } from "../../machines/Host.js"
import { ChannelClaims } from "../../services/channels/Claims.js"
import { ChannelTerms } from "../../services/channels/Terms.js"
import { Accounts } from "../../services/ledger/Ledger.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { bigints } from "../support/channelChain.js"
import { ledgerBalance } from "../support/channelClaims.js"
import { openTestChannel, saltOf } from "../support/channelOpen.js"
import { channelOffer, voucherCall } from "../support/channelVouchers.js"
import { call, devAccount, publicClient, usdcBalance } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"
import { officialBatchSettlementAbi } from "../support/x402Official.js"

const PRICE = 11_000n // 0.01 base price + 0.001 platform fee
const DEPOSIT = 1_000_000n

/** Our clock starts at the real time (the dispute window is measured from the call's time), then only tests move it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const api = (path: string, json: unknown, headers: Record<string, string>) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}${path}`, { method: "POST", json, headers })))
const operator = { authorization: `Bearer ${OPERATOR_TOKEN}`, "x-operator": "disputes desk" }

/** Filed by the payer with the X-Client-Id of the call's response, then resolved by the platform. */
const disputeAndResolve = (requestId: string, clientId: string, resolution: Record<string, unknown>) =>
  Effect.gen(function* () {
    const opened = yield* api("/api/v1/disputes", { transactionId: requestId, reason: "quality", evidence: "the answer was wrong" }, { "X-Client-Id": clientId })
    expect(opened.status).toBe(201)
    const resolved = yield* api(`/api/v1/operator/disputes/${opened.body.data.disputeId}/resolve`, resolution, operator)
    expect(resolved.status).toBe(200)
    return resolved.body.data as { status: string; client_refund: string }
  })

const channelRow = (id: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ charged: string; claimed: string }>`SELECT charged_cumulative::text AS charged, claimed_cumulative::text AS claimed FROM channels WHERE id = ${id}`.pipe(
      Effect.map((r) => ({ charged: BigInt(r[0]!.charged), claimed: BigInt(r[0]!.claimed) })), Effect.orDie))
const chargeOf = (requestId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ status: string; keptAmount: string | null; refundedAmount: string }>`
      SELECT status, kept_amount::text, refunded_amount::text FROM channel_charges WHERE request_id = ${requestId}`.pipe(Effect.map((r) => r[0]), Effect.orDie))
const escrowOf = (requestId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ status: string; state: string }>`SELECT s.status, e.state FROM executions e JOIN escrows s ON s.id = e.escrow_id WHERE e.id = ${requestId}`.pipe(
      Effect.map((r) => r[0]), Effect.orDie))
const refundsOf = (requestId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) => sql<{ amount: string; status: string }>`SELECT amount::text, status FROM refunds WHERE execution_id = ${requestId}`.pipe(Effect.orDie))
/** The contract's `channels(id)`: [balance, totalClaimed]. */
const onChain = (id: string) =>
  Effect.map(
    Effect.promise(() => publicClient().readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName: "channels", args: [id as Hex] })),
    (r) => bigints(r, 2)
  )
/** One call of a new echo agent of dev account `owner`, paid by voucher from a new channel of dev account `payer` holding DEPOSIT. */
const oneVoucherCall = (owner: number, payerIndex: number, label: string) =>
  Effect.gen(function* () {
    const { baseUrl, sql } = yield* TestEnv
    const agent = yield* fakeAgent("echo")
    const agentId = yield* registerAgent(devAccount(owner), agent.url)
    const payer = devAccount(payerIndex)
    const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, saltOf(`dispute ${label} ${Date.now()}`))
    const accepted = yield* channelOffer(baseUrl, agentId)
    const paid = yield* voucherCall(baseUrl, agentId, label, { payer, config, maxClaimable: PRICE, accepted })
    expect(paid.status).toBe(200)
    return { payer, channelId, paid }
  })
const claimAll = Effect.gen(function* () {
  const terms = Option.getOrThrow((yield* ChannelTerms).on("base-sepolia"))
  return yield* (yield* ChannelClaims).claimOn(terms, true)
})

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { timeout: 120_000 })("disputes on channel-paid calls", (it) => {
  it.scoped("resolved for the client before the claim: the share goes back into the channel, the next claim takes less, chain and ledger agree", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url)
      const payer = devAccount(3)
      const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, saltOf(`dispute before claim ${Date.now()}`))
      const accepted = yield* channelOffer(baseUrl, agentId)
      const calls = []
      for (const i of [1n, 2n, 3n]) {
        const paid = yield* voucherCall(baseUrl, agentId, `call ${i}`, { payer, config, maxClaimable: i * PRICE, accepted })
        expect(paid.status).toBe(200)
        calls.push({ requestId: paid.requestId!, clientId: paid.clientId! })
      }
      const walletBefore = yield* Effect.promise(() => usdcBalance(payer.address))

      // The whole price of the second call back into the channel, in the resolution's transaction.
      const whole = yield* disputeAndResolve(calls[1]!.requestId, calls[1]!.clientId, { resolution: "resolved_client", notes: "wrong answer" })
      expect(whole).toMatchObject({ status: "resolved_client", client_refund: "0.011000" })
      expect(yield* chargeOf(calls[1]!.requestId)).toEqual({ status: "returned", keptAmount: "0", refundedAmount: PRICE.toString() })
      expect(yield* escrowOf(calls[1]!.requestId)).toEqual({ status: "refunded", state: "completed.resolved" })
      expect(yield* channelRow(channelId)).toEqual({ charged: 2n * PRICE, claimed: 0n })

      // A quarter of the third call's price (a split): the charge keeps the rest.
      const share = PRICE / 4n
      const split = yield* disputeAndResolve(calls[2]!.requestId, calls[2]!.clientId, { resolution: "resolved_split", clientShareBps: 2_500 })
      expect(split).toMatchObject({ status: "resolved_split", client_refund: "0.002750" })
      expect(yield* chargeOf(calls[2]!.requestId)).toEqual({ status: "kept", keptAmount: (PRICE - share).toString(), refundedAmount: share.toString() })
      const charged = 3n * PRICE - PRICE - share
      expect(yield* channelRow(channelId)).toEqual({ charged, claimed: 0n })

      // No second path: no refund queued, nothing sent to the payer's wallet, nothing left in disputes held or payable.
      expect(yield* refundsOf(calls[1]!.requestId)).toEqual([])
      expect(yield* refundsOf(calls[2]!.requestId)).toEqual([])
      yield* (yield* TreasuryWorker).processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(walletBefore)
      expect(yield* ledgerBalance(Accounts.disputesHeld)).toBe(0n)
      expect(yield* ledgerBalance(Accounts.refundsPayable)).toBe(0n)
      expect(yield* ledgerBalance(Accounts.channelReceivable)).toBe(charged)

      // The payer's next voucher over its old total is stale: the corrective 402 names the lowered total, and a voucher
      // over it pays.
      const stale = yield* voucherCall(baseUrl, agentId, "after", { payer, config, maxClaimable: 4n * PRICE, accepted })
      expect({ status: stale.status, corrective: stale.correctiveCumulative }).toEqual({ status: 402, corrective: charged })
      const next = yield* voucherCall(baseUrl, agentId, "after", { payer, config, maxClaimable: charged + PRICE, accepted })
      expect({ status: next.status, charged: next.charged }).toEqual({ status: 200, charged: { amount: PRICE, cumulative: charged + PRICE } })

      // The claim takes what the channel kept: below the voucher's ceiling, to the micro-USDC on chain and in the ledger.
      expect(yield* claimAll).toBeGreaterThanOrEqual(1)
      const total = charged + PRICE
      expect(yield* onChain(channelId)).toEqual([DEPOSIT, total])
      expect(yield* channelRow(channelId)).toEqual({ charged: total, claimed: total })
      expect(yield* ledgerBalance(Accounts.channelReceivable)).toBe(total)
      // The payer's channel balance after the refunds: the deposit less exactly what was kept (the first and fourth
      // calls, three quarters of the third; nothing of the second).
      const [balance, totalClaimed] = yield* onChain(channelId)
      expect(balance! - totalClaimed!).toBe(DEPOSIT - 2n * PRICE - (PRICE - share))
    }))

  it.scoped("resolved for the client after the claim took the charge: the share is sent to the payer's wallet, the channel and the chain keep the claim", () =>
    Effect.gen(function* () {
      yield* realNow
      const { payer, channelId, paid } = yield* oneVoucherCall(2, 5, "claimed")
      expect(yield* claimAll).toBeGreaterThanOrEqual(1)
      expect(yield* chargeOf(paid.requestId!)).toMatchObject({ status: "claimed" })
      const receivableBefore = yield* ledgerBalance(Accounts.channelReceivable)
      const walletBefore = yield* Effect.promise(() => usdcBalance(payer.address))

      const resolved = yield* disputeAndResolve(paid.requestId!, paid.clientId!, { resolution: "resolved_client" })
      expect(resolved).toMatchObject({ status: "resolved_client", client_refund: "0.011000" })
      // Claimed money cannot be un-claimed: the channel's charge stays, a refund is queued and sent by the treasury.
      expect(yield* chargeOf(paid.requestId!)).toEqual({ status: "claimed", keptAmount: PRICE.toString(), refundedAmount: "0" })
      expect(yield* refundsOf(paid.requestId!)).toEqual([{ amount: PRICE.toString(), status: "pending" }])
      expect(yield* escrowOf(paid.requestId!)).toEqual({ status: "refunding", state: "completed.refundingDispute" })
      yield* (yield* TreasuryWorker).processDue
      expect((yield* Effect.promise(() => usdcBalance(payer.address))) - walletBefore).toBe(PRICE)
      expect(yield* escrowOf(paid.requestId!)).toEqual({ status: "refunded", state: "completed.resolved" })
      expect(yield* channelRow(channelId)).toEqual({ charged: PRICE, claimed: PRICE })
      expect(yield* onChain(channelId)).toEqual([DEPOSIT, PRICE])
      expect(yield* ledgerBalance(Accounts.channelReceivable)).toBe(receivableBefore)
      expect(yield* ledgerBalance(Accounts.refundsPayable)).toBe(0n)
      expect(yield* ledgerBalance(Accounts.disputesHeld)).toBe(0n)
    }))

  it.scoped("resolved for the client after the payer's money left the channel unclaimed: nothing is sent (the payer has it), the share lowers the write-off", () =>
    Effect.gen(function* () {
      yield* realNow
      const { payer, channelId, paid } = yield* oneVoucherCall(4, 8, "written off")
      // The withdrawal watch's facts (as it reads them from the contract's logs): the payer's withdrawal started and
      // finalized before any claim, so the charge is written off to channel_losses.
      const host = yield* MachineHost
      const now = Date.now()
      yield* host.deliverNow("channel", channelId, { type: "WITHDRAW_INITIATED", at: now, finalizableAt: now + 1_000 })
      yield* host.deliverNow("channel", channelId, { type: "WITHDRAW_FINALIZED", at: now + 1_000, txHash: `0x${"ab".repeat(32)}`, amount: DEPOSIT.toString(), unsettled: "0" })
      expect(yield* chargeOf(paid.requestId!)).toMatchObject({ status: "written_off" })
      expect(yield* ledgerBalance(Accounts.channelLosses)).toBe(PRICE)
      const walletBefore = yield* Effect.promise(() => usdcBalance(payer.address))

      const resolved = yield* disputeAndResolve(paid.requestId!, paid.clientId!, { resolution: "resolved_client" })
      expect(resolved).toMatchObject({ status: "resolved_client", client_refund: "0.011000" })
      expect(yield* refundsOf(paid.requestId!)).toEqual([])
      expect(yield* escrowOf(paid.requestId!)).toEqual({ status: "refunded", state: "completed.resolved" })
      yield* (yield* TreasuryWorker).processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(walletBefore)
      expect(yield* ledgerBalance(Accounts.channelLosses)).toBe(0n)
      expect(yield* ledgerBalance(Accounts.disputesHeld)).toBe(0n)
      expect(yield* ledgerBalance(Accounts.refundsPayable)).toBe(0n)
    }))
})
