// The unmodified official batch-settlement client (@x402/fetch + @x402/evm's BatchSettlementEvmScheme) paying one
// agent's capability on the devnet: the first call deposits, the next 100 pay by voucher only, then the client's
// cooperative refund(url). Once the claims and the settle ran, the payer's USDC, the channel on chain
// (channels(id): balance, totalClaimed) and our ledger agree to the micro-USDC.
import { expect, layer } from "@effect/vitest"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { decodePaymentResponseHeader } from "@x402/fetch"
import { Effect, Schedule } from "effect"
import { getAddress, type Hex } from "viem"
import { beforeAll, inject } from "vitest"
import { fakeAgent } from "../support/agents.js"
import { channelClient, payloadType, recordingFetch } from "../support/channelClient.js"
import { settleSharedPool } from "../support/channelPool.js"
import { bigints } from "../support/channelChain.js"
import { devAccount, publicClient, usdcBalance } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { officialBatchSettlementAbi } from "../support/x402Official.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice
const VOUCHER_CALLS = 100
const CALLS = BigInt(VOUCHER_CALLS + 1)

/** channels(id) on x402BatchSettlement. */
const onChain = (channelId: Hex) =>
  Effect.promise(async () => {
    const [balance, totalClaimed] = bigints(
      await publicClient().readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName: "channels", args: [channelId] }),
      2
    )
    return { balance, totalClaimed }
  })

const hexId = (id: string): Hex => {
  if (!/^0x[0-9a-f]{64}$/.test(id)) throw new Error(`not a channel id: ${id}`)
  return `0x${id.slice(2)}`
}

interface ChannelRow {
  readonly id: string
  readonly balance: string
  readonly chargedCumulative: string
  readonly claimedCumulative: string
  readonly settledCumulative: string
  readonly status: string
}

// A claim every second and a claim as soon as anything is charged: the claims and the settle follow the calls on their own.
const SETTINGS = {
  EXECUTION_TIMEOUT_MS: "1500",
  CHANNEL_CLAIM_INTERVAL_SECONDS: "1",
  CHANNEL_CLAIM_AT_MICRO_USDC: "1",
  // 101 calls from one payer to one agent in a few seconds: above the default per-window limits.
  RATE_LIMIT_AGENT_PER_WINDOW: "1000",
  RATE_LIMIT_CLIENT_PER_WINDOW: "1000"
}

// Claims of earlier files on the shared devnet must not ride on this file's settle.
beforeAll(settleSharedPool)

layer(TestApp(SETTINGS), { excludeTestServices: true })("the official batch-settlement client", (it) => {
  it.scoped(
    "deposits once, pays 100 calls by voucher, refunds the rest; payer, channel on chain and ledger agree",
    () =>
      Effect.gen(function* () {
        const { baseUrl, sql } = yield* TestEnv
        const agent = yield* fakeAgent("echo")
        const agentId = yield* registerAgent(devAccount(2), agent.url, { tier: "premium" })
        const payer = devAccount(5)
        const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))

        const sent: Array<string> = []
        const payerClient = channelClient(payer, { rpcUrl: inject("rpcUrl"), usdc: getAddress(inject("usdcAddress")), salt: "channel-official-client test", depositCalls: 200, fetch: recordingFetch(sent) })
        const pay = (n: number) =>
          Effect.promise(async () => {
            // #region docs:channel-pay
            const response = await payerClient.fetch(`${baseUrl}/api/v1/execute`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: `call ${n}` } })
            })
            const header = response.headers.get("PAYMENT-RESPONSE")
            const paid = header === null ? undefined : decodePaymentResponseHeader(header) // { success, payer, network, extra: { chargedAmount, channelState } }
            // #endregion
            const body: unknown = await response.text().then((text) => { try { return JSON.parse(text) } catch { return text } })
            const charged = paid?.extra?.["chargedAmount"]
            return { status: response.status, body, paid: { success: paid?.success, chargedAmount: typeof charged === "string" ? BigInt(charged) : undefined } }
          })

        const first = yield* pay(0)
        expect(first).toMatchObject({ status: 200, body: { success: true, data: { status: "completed" } }, paid: { success: true, chargedAmount: PRICE } })
        expect(sent.map(payloadType)).toEqual(["deposit"])

        for (let n = 1; n <= VOUCHER_CALLS; n++) {
          const answer = yield* pay(n)
          expect(answer).toMatchObject({ status: 200, body: { success: true, data: { status: "completed" } }, paid: { success: true, chargedAmount: PRICE } })
        }
        // One paid attempt per call: no corrective 402 (the client's cumulative base never went stale), no second deposit.
        expect(sent.map(payloadType)).toEqual(["deposit", ...Array.from({ length: VOUCHER_CALLS }, () => "voucher")])

        const [channel] = yield* sql<ChannelRow>`SELECT id, balance::text, charged_cumulative::text, claimed_cumulative::text,
          settled_cumulative::text, status FROM channels WHERE payer = ${payer.address.toLowerCase()}`
        if (channel === undefined) throw new Error("no channel row for the payer")
        expect(BigInt(channel.chargedCumulative)).toBe(CALLS * PRICE)

        const refunded = yield* Effect.promise(async () => {
          // #region docs:channel-refund
          const refunded = await payerClient.scheme.refund(`${baseUrl}/api/v1/channels/refund`)
          // #endregion
          return refunded
        })
        expect(refunded.success).toBe(true)

        // The claim and settle workers run on their schedule: wait (bounded) until everything charged is settled.
        const settled = yield* sql<ChannelRow>`SELECT id, balance::text, charged_cumulative::text, claimed_cumulative::text,
          settled_cumulative::text, status FROM channels WHERE id = ${channel.id}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.filterOrFail((row): row is ChannelRow => row !== undefined && BigInt(row.settledCumulative) === CALLS * PRICE),
          Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("60 seconds")))
        )
        expect(settled).toMatchObject({ chargedCumulative: String(CALLS * PRICE), claimedCumulative: String(CALLS * PRICE) })

        // The chain: the payer paid exactly the calls; the channel holds what was claimed and nothing refundable.
        const state = yield* onChain(hexId(channel.id))
        expect(state).toEqual({ balance: CALLS * PRICE, totalClaimed: CALLS * PRICE })
        expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - CALLS * PRICE)

        // The ledger: one settled channel payment per call, the receivable emptied into the treasury, treasury = chain.
        const [payments] = yield* sql<{ n: string; total: string }>`SELECT count(*)::text AS n, coalesce(sum(amount), 0)::text AS total
          FROM payments WHERE purpose = 'channel' AND channel_id = ${channel.id}`
        expect(payments).toEqual({ n: String(CALLS), total: String(CALLS * PRICE) })
        const [receivable] = yield* sql<{ total: string }>`SELECT coalesce(sum(amount), 0)::text AS total FROM ledger_entries
          WHERE account_id = 'channel_receivable'`
        expect(receivable?.total).toBe("0")
        expect(yield* ledgerMatchesChain).toBe(0n)
      }),
    // Once is all: a second attempt would find the agent registered and the channel already open.
    { timeout: 180_000, retry: 0 }
  )
})
