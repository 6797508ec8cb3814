// Cooperative refunds with the official client: a partial one (`refund(url, { amount })`) gives the payer part of the
// unclaimed balance back and keeps the channel open (the row's balance comes down to the chain's, later calls still pay
// by voucher against what is left); a full one drains it; and a payer who comes back deposits into the same channel
// again (the client's default), which opens it again. Payer, channel on chain and ledger agree throughout.
import { expect, layer } from "@effect/vitest"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { Effect, Schedule } from "effect"
import { getAddress, type Hex } from "viem"
import { beforeAll, inject } from "vitest"
import { fakeAgent } from "../support/agents.js"
import { bigints } from "../support/channelChain.js"
import { channelClient, payloadType, recordingFetch } from "../support/channelClient.js"
import { settleSharedPool } from "../support/channelPool.js"
import { devAccount, publicClient, usdcBalance } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { officialBatchSettlementAbi } from "../support/x402Official.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice
const DEPOSIT = 100n * PRICE
const PART = 500_000n

const onChain = (channelId: string) =>
  Effect.promise(async () => {
    if (!/^0x[0-9a-f]{64}$/.test(channelId)) throw new Error(`not a channel id: ${channelId}`)
    const [balance, totalClaimed] = bigints(
      await publicClient().readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName: "channels", args: [channelId as Hex] }),
      2
    )
    return { balance, totalClaimed }
  })

// Claims of earlier files on the shared devnet must not ride on this file's settle.
beforeAll(settleSharedPool)

layer(TestApp({ CHANNEL_CLAIM_INTERVAL_SECONDS: "1", CHANNEL_CLAIM_AT_MICRO_USDC: "1" }), { excludeTestServices: true })("channel refunds", (it) => {
  it.scoped(
    "a partial refund keeps the channel open for vouchers; a full refund drains it; a new deposit opens it again",
    () =>
      Effect.gen(function* () {
        const { baseUrl, sql } = yield* TestEnv
        const agent = yield* fakeAgent("echo")
        const agentId = yield* registerAgent(devAccount(2), agent.url, { tier: "premium" })
        const payer = devAccount(8)
        const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))
        const sent: Array<string> = []
        const client = channelClient(payer, { rpcUrl: inject("rpcUrl"), usdc: getAddress(inject("usdcAddress")), salt: "partial refund test", depositCalls: 100, fetch: recordingFetch(sent) })
        const pay = (n: number) =>
          Effect.promise(async () => {
            const response = await client.fetch(`${baseUrl}/api/v1/execute`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: `call ${n}` } })
            })
            return { status: response.status, body: (await response.json()) as unknown }
          })
        const row = Effect.map(
          sql<{ id: string; balance: string; chargedCumulative: string; status: string }>`SELECT id, balance::text, charged_cumulative::text, status
            FROM channels WHERE payer = ${payer.address.toLowerCase()}`,
          (rows) => {
            if (rows[0] === undefined) throw new Error("no channel row for the payer")
            return rows[0]
          }
        )

        for (let n = 0; n < 3; n++) expect(yield* pay(n)).toMatchObject({ status: 200, body: { data: { status: "completed" } } })
        const channel = yield* row
        expect(channel).toMatchObject({ balance: String(DEPOSIT), chargedCumulative: String(3n * PRICE), status: "open" })

        const part = yield* Effect.promise(() => client.scheme.refund(`${baseUrl}/api/v1/channels/refund`, { amount: PART.toString() }))
        expect(part.success).toBe(true)
        // The refund claimed what was charged and gave back exactly the part asked for; the channel is still open.
        expect(yield* onChain(channel.id)).toEqual({ balance: DEPOSIT - PART, totalClaimed: 3n * PRICE })
        expect(yield* row).toMatchObject({ balance: String(DEPOSIT - PART), status: "open" })
        expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - DEPOSIT + PART)

        // Later calls pay by voucher against what is left: no new deposit.
        const before = sent.length
        for (let n = 3; n < 5; n++) expect(yield* pay(n)).toMatchObject({ status: 200, body: { data: { status: "completed" } } })
        expect(sent.slice(before).map(payloadType)).toEqual(["voucher", "voucher"])
        expect(yield* row).toMatchObject({ chargedCumulative: String(5n * PRICE), status: "open" })

        const rest = yield* Effect.promise(() => client.scheme.refund(`${baseUrl}/api/v1/channels/refund`))
        expect(rest.success).toBe(true)
        expect(yield* onChain(channel.id)).toEqual({ balance: 5n * PRICE, totalClaimed: 5n * PRICE })
        expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - 5n * PRICE)
        const drained = yield* row.pipe(
          Effect.filterOrFail((r) => r.status === "drained" || r.status === "closed"),
          Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("30 seconds")))
        )
        expect(drained).toMatchObject({ chargedCumulative: String(5n * PRICE), balance: String(5n * PRICE) })

        // The payer comes back: the client deposits into the same channel (same config and salt) and it opens again.
        const again = sent.length
        for (let n = 5; n < 7; n++) expect(yield* pay(n)).toMatchObject({ status: 200, body: { data: { status: "completed" } } })
        expect(sent.slice(again).map(payloadType).filter((t) => t === "deposit")).toHaveLength(1)
        const reopened = yield* row
        expect(reopened).toMatchObject({ id: channel.id, balance: String(5n * PRICE + DEPOSIT), chargedCumulative: String(7n * PRICE), status: "open" })
        const last = yield* Effect.promise(() => client.scheme.refund(`${baseUrl}/api/v1/channels/refund`))
        expect(last.success).toBe(true)
        expect(yield* onChain(channel.id)).toEqual({ balance: 7n * PRICE, totalClaimed: 7n * PRICE })
        expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - 7n * PRICE)

        // Everything claimed gets settled on the workers' schedule; then the treasury's ledger equals the chain.
        yield* sql<{ settled: string }>`SELECT settled_cumulative::text AS settled FROM channels WHERE id = ${channel.id}`.pipe(
          Effect.filterOrFail((rows) => rows[0]?.settled === String(7n * PRICE)),
          Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("60 seconds")))
        )
        expect(yield* ledgerMatchesChain).toBe(0n)
      }),
    { timeout: 180_000, retry: 0 }
  )
})
