// One channel, two server processes of the service on one database (each the start script with its own data directory,
// the run's devnet), and 50 voucher-paid calls sent at once over HTTP, alternating between them. Each call's voucher is
// over the next cumulative as the payer's client counts it (call i signs i × price), so most arrive out of order: the
// compare-and-set charge takes the one that matches, the others get the corrective 402 with the channel's charged total,
// and the client signs over it and sends the call again (to the other process). Each call is charged exactly once,
// never above its voucher's ceiling, and the channel's charged total is the sum of the prices.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { beforeAll } from "vitest"
import { channelMachine } from "../../machines/channel.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import { fakeAgent } from "../support/agents.js"
import { depositOnChain, saltOf } from "../support/channelOpen.js"
import { channelOffer, type VoucherCallResult, voucherCallPromise } from "../support/channelVouchers.js"
import { devAccount } from "../support/clients.js"
import { PROCESS_OPERATOR_TOKEN, registerAgentAt, sharedSettings, tempDataDir } from "../support/processes.js"
import { ensureBundle, serverProcess } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)

const PRICE = 11_000n // 0.01 base price + 0.001 platform fee
const CALLS = 50
const STALE = "invalid_batch_settlement_evm_cumulative_amount_mismatch"

describe("one channel through two server processes", () => {
  it.scopedLive("50 concurrent voucher calls alternating two processes: each charged once, never above its ceiling, stale ones corrected and paid on retry", () =>
    Effect.gen(function* () {
      const { env, query } = yield* sharedSettings({
        OPERATOR_TOKEN: PROCESS_OPERATOR_TOKEN,
        // Every request of the test comes from one address and one payer: the limits are not what is tested here.
        RATE_LIMIT_CLIENT_PER_WINDOW: "100000",
        RATE_LIMIT_AGENT_PER_WINDOW: "100000",
        // No claim during the test: the charges are the subject.
        CHANNEL_CLAIM_INTERVAL_SECONDS: "86400",
        CHANNEL_CLAIM_AT_MICRO_USDC: "1000000000",
        LOG_LEVEL: "warn"
      })
      const own = (dir: string) => serverProcess({ ...env, DATA_DIR: dir })
      const a = yield* Effect.flatMap(tempDataDir("marketplace-channel-a-"), own)
      const b = yield* Effect.flatMap(tempDataDir("marketplace-channel-b-"), own)
      const hosts = [a.baseUrl, b.baseUrl] as const
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgentAt(a, devAccount(6), agent.url)
      const payer = devAccount(9)

      // The channel holds exactly the 50 calls: a charge past their sum is over its balance.
      const deposit = PRICE * BigInt(CALLS)
      const { config, channelId, hash } = yield* Effect.promise(() => depositOnChain(payer, deposit, saltOf(`two processes ${Date.now()}`)))
      const opened = stepMachine(channelMachine, startMachine(channelMachine, {}).persisted, { type: "DEPOSIT_INCLUDED", at: Date.now(), txHash: hash, balance: deposit.toString() })
      yield* query(
        `INSERT INTO channels (id, network, payer, payer_authorizer, receiver, token, withdraw_delay, balance, status, machine_snapshot, salt, receiver_authorizer)
         VALUES ($1, 'base-sepolia', $2, $2, $3, $4, $5, $6, 'open', $7::jsonb, $8, $9)`,
        [channelId, payer.address.toLowerCase(), config.receiver.toLowerCase(), config.token.toLowerCase(), config.withdrawDelay, deposit.toString(),
          JSON.stringify(opened.persisted), config.salt.toLowerCase(), config.receiverAuthorizer.toLowerCase()]
      )
      const accepted = yield* channelOffer(a.baseUrl, agentId)

      // Call i (1-based) signs i × price, as a client counting its own calls does, and goes to process i mod 2; a
      // corrective 402 is answered by a voucher over the total it names, sent to the other process.
      const pay = async (i: number) => {
        const attempts: Array<{ readonly host: number; readonly result: VoucherCallResult }> = []
        let maxClaimable = BigInt(i) * PRICE
        for (let attempt = 0; attempt <= CALLS; attempt++) {
          const host = (i + attempt) % 2
          const result = await voucherCallPromise(hosts[host]!, agentId, `call ${i}`, { payer, config, maxClaimable, accepted })
          attempts.push({ host, result })
          if (result.status !== 402 || result.correctiveCumulative === undefined) return attempts
          maxClaimable = result.correctiveCumulative + PRICE
        }
        return attempts
      }
      const started = Date.now()
      const calls = yield* Effect.promise(() => Promise.all(Array.from({ length: CALLS }, (_, k) => pay(k + 1))))

      // Every call ends paid (200) after its corrective 402s; every 402 is the stale-cumulative one.
      const finals = calls.map((attempts) => attempts[attempts.length - 1]!)
      expect(finals.map((f) => f.result.status)).toEqual(Array(CALLS).fill(200))
      const refusals = calls.flatMap((attempts) => attempts.slice(0, -1).map((x) => x.result))
      expect(refusals.length).toBeGreaterThan(0)
      expect(new Set(refusals.map((r) => `${r.status} ${r.reason}`))).toEqual(new Set([`402 ${STALE}`]))
      // Both processes answered corrective 402s and paid calls.
      expect(new Set(calls.flatMap((attempts) => attempts.slice(0, -1).map((x) => x.host)))).toEqual(new Set([0, 1]))
      expect(new Set(finals.map((f) => f.host))).toEqual(new Set([0, 1]))
      // What each answer says it charged: the price, and together one gapless chain of totals up to the sum.
      expect(finals.every((f) => f.result.charged?.amount === PRICE)).toBe(true)
      const totals = finals.map((f) => f.result.charged!.cumulative).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))
      expect(totals).toEqual(Array.from({ length: CALLS }, (_, k) => BigInt(k + 1) * PRICE))

      // The rows: one kept charge per call, each within the voucher it was charged on, the cumulative never above it.
      const charges = yield* query<{ requestId: string; amount: string; cumulativeAfter: string; voucherMaxClaimable: string; status: string }>(
        `SELECT request_id AS "requestId", amount::text, cumulative_after::text AS "cumulativeAfter", voucher_max_claimable::text AS "voucherMaxClaimable", status
         FROM channel_charges WHERE channel_id = $1 ORDER BY cumulative_after`, [channelId])
      expect(charges).toHaveLength(CALLS)
      expect(new Set(charges.map((c) => c.requestId))).toEqual(new Set(finals.map((f) => f.result.requestId)))
      for (const [k, c] of charges.entries()) {
        expect({ amount: c.amount, status: c.status, cumulativeAfter: c.cumulativeAfter }).toEqual({ amount: PRICE.toString(), status: "kept", cumulativeAfter: (BigInt(k + 1) * PRICE).toString() })
        expect(BigInt(c.cumulativeAfter)).toBeLessThanOrEqual(BigInt(c.voucherMaxClaimable))
      }
      const [row] = yield* query<{ charged: string; voucher: string }>(
        `SELECT charged_cumulative::text AS charged, voucher_max_claimable::text AS voucher FROM channels WHERE id = $1`, [channelId])
      expect(row).toEqual({ charged: deposit.toString(), voucher: deposit.toString() })
      const [executions] = yield* query<{ n: number }>(`SELECT count(*)::int AS n FROM executions WHERE agent_id = $1 AND status = 'completed'`, [agentId])
      expect(executions?.n).toBe(CALLS)
      const [receivable] = yield* query<{ balance: string }>(`SELECT COALESCE(sum(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = 'channel_receivable'`)
      expect(receivable?.balance).toBe(deposit.toString())
      yield* Effect.logInfo(`${CALLS} calls and ${refusals.length} corrective 402s through two processes: ${Date.now() - started} ms`)
    }), { timeout: 300_000 })
})
