// A chain's budget bought with a channel voucher (X-Chain-Budget with a batch-settlement payment): the voucher's charge
// is the whole budget, the root and its sub-calls spend from it, and as the chain ends the unspent budget goes back to
// the channel through the ledger (the charge keeps what the chain spent, the channel's charged total drops by the
// rest, the claim takes only what was spent); nothing is sent to the payer's wallet.
import { expect, layer } from "@effect/vitest"
import { Effect, Option, TestClock } from "effect"
import type { Hex } from "viem"
import { BATCH_SETTLEMENT_ADDRESS } from "../../layers/x402/channelContracts.js"
import { ChannelClaims } from "../../services/channels/Claims.js"
import { ChannelTerms } from "../../services/channels/Terms.js"
import { Accounts } from "../../services/ledger/Ledger.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { bigints } from "../support/channelChain.js"
import { ledgerBalance } from "../support/channelClaims.js"
import { openTestChannel, saltOf } from "../support/channelOpen.js"
import { channelOffer, voucherCall } from "../support/channelVouchers.js"
import { devAccount, publicClient, usdcBalance } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { setLimits } from "../support/limits.js"
import { chainAgent } from "../support/chains.js"
import { officialBatchSettlementAbi } from "../support/x402Official.js"

const BUDGET = 100_000n // 0.10
const DEPOSIT = 1_000_000n

/** Our clock starts at the real time, then only tests move it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))


layer(TestApp({ BACKGROUND_WORKERS: "false" }), { timeout: 120_000 })("chain budgets paid by channel voucher", (it) => {
  it.scoped("the voucher charges the whole budget; the chain spends from it; the unspent budget goes back to the channel as the chain ends; the claim takes what was spent", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl, sql } = yield* TestEnv
      const [a, b] = [yield* fakeAgent(), yield* fakeAgent("echo")]
      const A = yield* chainAgent(devAccount(1), a.url)
      const B = yield* chainAgent(devAccount(2), b.url)
      a.setBehaviour({ kind: "call-back", baseUrl, calls: [{ body: { targetAgentId: B, capabilityId: "echo", input: { text: "from A" } } }] })
      const payer = devAccount(3)
      const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, saltOf(`chain budget ${Date.now()}`))
      const walletBefore = yield* Effect.promise(() => usdcBalance(payer.address))
      // The payer keeps a daily limit: its spending counts the budget while the chain runs.
      expect((yield* setLimits(payer, { perDayMax: 10_000_000n })).status).toBe(200)

      // The budget's 402 offers the channel for the whole budget, with no deposit size suggested (a plain call's offer
      // suggests 100 calls' worth; 100 budgets would lock far more than a chain needs): the payer's policy decides.
      const accepted = yield* channelOffer(baseUrl, A, { "X-Chain-Budget": "0.10" })
      expect(accepted.amount).toBe(BUDGET.toString())
      expect(accepted.extra["minDeposit"]).toBeUndefined()
      const callOffer = yield* channelOffer(baseUrl, A)
      expect(callOffer.extra["minDeposit"]).toBe((BigInt(callOffer.amount) * 100n).toString())
      const root = yield* voucherCall(baseUrl, A, "a chain", { payer, config, maxClaimable: BUDGET, accepted, headers: { "X-Chain-Budget": "0.10" } })
      expect(root.status, JSON.stringify(root.data ?? root.errorCode)).toBe(200)
      const chain = root.data?.["chain"] as { chainId: string; status: string; refunded: string }
      expect(chain.status).toBe("completed")

      // What the chain spent: its calls' prices (the root's and A's sub-call to B).
      const [spentRow] = yield* sql<{ spent: string; n: number }>`SELECT COALESCE(sum(price), 0)::text AS spent, count(*)::int AS n FROM executions WHERE chain_id = ${chain.chainId} AND status = 'completed'`
      expect(spentRow?.n).toBe(2)
      const spent = BigInt(spentRow!.spent)
      const left = BUDGET - spent
      expect(chain.refunded).toBe((Number(left) / 1e6).toFixed(6))
      // The chain ended before the root's answer: PAYMENT-RESPONSE says what the channel kept of the budget.
      expect(root.charged).toEqual({ amount: spent, cumulative: spent })

      // The charge kept what was spent; the channel's charged total dropped by the rest; the ledger agrees.
      const [charge] = yield* sql<{ status: string; amount: string; keptAmount: string }>`
        SELECT status, amount::text, kept_amount::text FROM channel_charges WHERE request_id = ${root.requestId!}`
      expect(charge).toEqual({ status: "kept", amount: BUDGET.toString(), keptAmount: spent.toString() })
      const [row] = yield* sql<{ charged: string }>`SELECT charged_cumulative::text AS charged FROM channels WHERE id = ${channelId}`
      expect(row?.charged).toBe(spent.toString())
      expect(yield* ledgerBalance(Accounts.channelReceivable)).toBe(spent)
      expect(yield* ledgerBalance(Accounts.chainBudgets)).toBe(0n)
      expect(yield* ledgerBalance(Accounts.refundsPayable)).toBe(0n)
      // As a refund of the unspent budget would, its return gives it back to the payer's day: what is left counted is
      // what the chain spent.
      const [spending] = yield* sql<{ spent: string }>`SELECT COALESCE(SUM(spent), 0)::text AS spent FROM payer_spending WHERE payer = ${payer.address.toLowerCase()} AND agent_id = ''`
      expect(spending?.spent).toBe(spent.toString())
      // No second path: no refund queued or sent.
      expect(yield* sql`SELECT 1 FROM refunds WHERE chain_id = ${chain.chainId}`).toEqual([])
      yield* (yield* TreasuryWorker).processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(walletBefore)

      // The payer's next voucher builds on what the chain spent; the claim takes exactly that on chain.
      const plain = yield* channelOffer(baseUrl, B)
      const next = yield* voucherCall(baseUrl, B, "after the chain", { payer, config, maxClaimable: spent + BigInt(plain.amount), accepted: plain })
      expect(next.status).toBe(200)
      const terms = Option.getOrThrow((yield* ChannelTerms).on("base-sepolia"))
      expect(yield* (yield* ChannelClaims).claimOn(terms, true)).toBeGreaterThanOrEqual(1)
      const onChain = yield* Effect.promise(() => publicClient().readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName: "channels", args: [channelId as Hex] }))
      expect(bigints(onChain, 2)).toEqual([DEPOSIT, spent + BigInt(plain.amount)])
    }))

  it.scoped("a voucher of the root's price alone does not buy the budget: the corrective 402 names the budget, nothing charged", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const A = yield* chainAgent(devAccount(4), agent.url)
      const payer = devAccount(5)
      const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, saltOf(`chain budget short ${Date.now()}`))
      const accepted = yield* channelOffer(baseUrl, A, { "X-Chain-Budget": "0.10" })
      const short = yield* voucherCall(baseUrl, A, "a chain", { payer, config, maxClaimable: 11_000n, accepted, headers: { "X-Chain-Budget": "0.10" } })
      expect({ status: short.status, reason: short.reason, corrective: short.correctiveCumulative }).toEqual({
        status: 402, reason: "invalid_batch_settlement_evm_cumulative_amount_mismatch", corrective: 0n
      })
      expect(yield* sql`SELECT 1 FROM channel_charges WHERE channel_id = ${channelId}`).toEqual([])
      expect(yield* sql`SELECT 1 FROM chains WHERE root_agent_id = ${A}`).toEqual([])
    }))

  it.scoped("a root call that fails gives the whole budget back to the channel as its chain ends: nothing kept, nothing claimed", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "model crashed" } })
      const A = yield* chainAgent(devAccount(6), agent.url)
      const payer = devAccount(7)
      const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, saltOf(`chain budget failed ${Date.now()}`))
      const receivableBefore = yield* ledgerBalance(Accounts.channelReceivable)
      const escrowBefore = yield* ledgerBalance(Accounts.escrow)
      const accepted = yield* channelOffer(baseUrl, A, { "X-Chain-Budget": "0.10" })
      const failed = yield* voucherCall(baseUrl, A, "a chain", { payer, config, maxClaimable: BUDGET, accepted, headers: { "X-Chain-Budget": "0.10" } })
      expect(failed.status).toBe(502)
      const [charge] = yield* sql<{ status: string; keptAmount: string }>`
        SELECT c.status, c.kept_amount::text FROM channel_charges c JOIN channels ch ON ch.id = c.channel_id WHERE ch.id = ${channelId}`
      expect(charge).toEqual({ status: "returned", keptAmount: "0" })
      const [row] = yield* sql<{ charged: string }>`SELECT charged_cumulative::text AS charged FROM channels WHERE id = ${channelId}`
      expect(row?.charged).toBe("0")
      const [ended] = yield* sql<{ status: string; refundAmount: string }>`SELECT status, refund_amount::text FROM chains WHERE root_agent_id = ${A}`
      expect(ended).toEqual({ status: "failed", refundAmount: BUDGET.toString() })
      expect(yield* ledgerBalance(Accounts.channelReceivable)).toBe(receivableBefore)
      expect(yield* ledgerBalance(Accounts.chainBudgets)).toBe(0n)
      expect(yield* ledgerBalance(Accounts.escrow)).toBe(escrowBefore)
    }))
})
