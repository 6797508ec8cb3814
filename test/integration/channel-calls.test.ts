// Paid calls by channel voucher (x402 batch-settlement): the unmodified official client pays with vouchers only once
// its channel holds a deposit; each call is charged once in the reservation (channel row, channel_charges and the
// ledger's channel receivable agree), nothing goes on chain per call; a stale or replayed voucher, a foreign channel
// config and a failed call are refused or given back as the scheme describes.
import { expect, layer } from "@effect/vitest"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { computeChannelId, signVoucher } from "@x402/evm/batch-settlement/client"
import { decodePaymentResponseHeader } from "@x402/fetch"
import { Effect } from "effect"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { fakeAgent } from "../support/agents.js"
import { meteredAgent } from "../support/meteredAgent.js"
import { marketplace } from "../../sdk/src/client.js"
import type { PrivateKeyAccount } from "viem/accounts"
import { devAccount, publicClient, TREASURY } from "../support/clients.js"
import { channelConfigOf, channelFetch, NETWORK, openTestChannel, saltOf, type TestChannelConfig } from "../support/channelOpen.js"
import { inject } from "vitest"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { mcpSession } from "../support/mcp.js"
import { registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.01 base price + 0.001 platform fee
const DEPOSIT = 1_000_000n

const body = (agentId: string, text: string) => JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text } })

const channelRow = (id: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ chargedCumulative: string; status: string }>`SELECT charged_cumulative::text, status FROM channels WHERE id = ${id}`.pipe(Effect.map((r) => r[0]), Effect.orDie))
const receivable = Effect.flatMap(TestEnv, ({ sql }) =>
  sql<{ balance: string }>`SELECT COALESCE(sum(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = 'channel_receivable'`.pipe(Effect.map((r) => BigInt(r[0]!.balance)), Effect.orDie))

/** The challenge's batch-settlement offer, as a payer's client reads it from PAYMENT-REQUIRED. */
const channelOffer = (baseUrl: string, agentId: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: body(agentId, "offer") })
    const required = decodePaymentRequiredHeader(response.headers.get("PAYMENT-REQUIRED")!)
    return required.accepts.find((a) => a.scheme === "batch-settlement")!
  })

/** One voucher-paid call sent by hand: the payer's voucher over `maxClaimable` on the channel of `config`. */
const voucherCall = (baseUrl: string, agentId: string, text: string, p: { payer: PrivateKeyAccount; config: TestChannelConfig; maxClaimable: bigint; accepted: unknown; header?: string }) =>
  Effect.promise(async () => {
    const header = p.header ?? encodeHeaderJson({
      x402Version: 2,
      accepted: p.accepted,
      payload: { type: "voucher", channelConfig: p.config, voucher: await signVoucher(p.payer, computeChannelId(p.config, NETWORK), p.maxClaimable.toString(), NETWORK) }
    })
    const response = await fetch(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json", "PAYMENT-SIGNATURE": header }, body: body(agentId, text) })
    const json = (await response.json()) as { data?: { requestId: string; status: string }; error?: { code: string; details: Record<string, unknown> } }
    const required = response.headers.get("PAYMENT-REQUIRED")
    return { status: response.status, json, header, required: required === null ? undefined : decodePaymentRequiredHeader(required), response: response.headers.get("PAYMENT-RESPONSE") }
  })

/** The default RATE_LIMIT_CLIENT_PER_WINDOW. */
const CLIENT_LIMIT = 120

/** Requests counted against a client's rate-limit windows: all windows together, and the latest window. */
const clientCounted = (client: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ total: number; latest: number }>`
      SELECT COALESCE(sum(count), 0)::int AS total,
             COALESCE((array_agg(count ORDER BY window_start DESC))[1], 0)::int AS latest
      FROM rate_limit_windows WHERE key = ${`client:${client.toLowerCase()}`}`.pipe(Effect.map((r) => r[0]!), Effect.orDie))

const chargesOf = (channelId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ status: string; amount: string }>`SELECT status, amount::text FROM channel_charges WHERE channel_id = ${channelId} ORDER BY created_at`.pipe(Effect.orDie))

layer(TestApp(), { excludeTestServices: true, timeout: 120_000 })("paid calls by channel voucher", (it) => {
  it.scoped("the official client pays three calls by voucher: charged once each, no transaction per call", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(2), agent.url)
      const payer = devAccount(3)
      const salt = saltOf(`three calls ${Date.now()}`)
      const { channelId } = yield* openTestChannel(sql, payer, DEPOSIT, salt)
      const treasuryNonce = yield* Effect.promise(() => publicClient().getTransactionCount({ address: TREASURY }))

      const { fetch: pay } = channelFetch(payer, { salt })
      const remaining: Array<number> = []
      const countedBefore = yield* clientCounted(payer.address)
      for (let i = 0; i < 3; i++) {
        const response = yield* Effect.promise(() => pay(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: body(agentId, `call ${i}`) }))
        if (response.status !== 200) throw new Error(`${response.status}: ${yield* Effect.promise(() => response.text())} ${response.headers.get("PAYMENT-REQUIRED") ?? ""}`)
        const settle = decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!)
        expect(settle).toMatchObject({ success: true, transaction: "", extra: { chargedAmount: PRICE.toString(), channelState: { chargedCumulativeAmount: (PRICE * BigInt(i + 1)).toString() } } })
        // The signed receipt names the scheme, the channel and what it was charged.
        expect(settle.extensions?.["receipt"]).toMatchObject({ funding: "channel", scheme: "batch-settlement", channelId, charged: PRICE.toString(), transaction: "" })
        const json = (yield* Effect.promise(() => response.json())) as { data: { status: string; output: { echo: { text: string } } } }
        expect(json.data).toMatchObject({ status: "completed", output: { echo: { text: `call ${i}` } } })
        remaining.push(Number(response.headers.get("X-RateLimit-Client-Remaining")))
      }
      // Each call counts once in the payer's rate-limit windows (a minute's window may end between two calls: summed
      // over windows), and the last answer says what its window has left.
      expect((yield* clientCounted(payer.address)).total - countedBefore.total).toBe(3)
      expect(remaining[2]).toBe(CLIENT_LIMIT - (yield* clientCounted(payer.address)).latest)
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: (3n * PRICE).toString(), status: "open" })
      expect(yield* receivable).toBe(3n * PRICE)
      expect(yield* Effect.promise(() => publicClient().getTransactionCount({ address: TREASURY }))).toBe(treasuryNonce)
    }))


  it.scoped("a stale voucher gets the corrective 402 with our state; a re-sent header answers its own call, charged once", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(4), agent.url)
      const payer = devAccount(3)
      const salt = saltOf(`stale ${Date.now()}`)
      const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, salt)
      const accepted = yield* channelOffer(baseUrl, agentId)
      expect(accepted).toMatchObject({ payTo: TREASURY, amount: PRICE.toString(), extra: { receiverAuthorizer: TREASURY, withdrawDelay: 86_400, assetTransferMethod: "eip3009" } })

      const first = yield* voucherCall(baseUrl, agentId, "first", { payer, config, maxClaimable: PRICE, accepted })
      expect(first.status).toBe(200)
      // The same header again (a client that lost the answer): the same call, nothing charged again.
      const again = yield* voucherCall(baseUrl, agentId, "first", { payer, config, maxClaimable: PRICE, accepted, header: first.header })
      expect(again.status).toBe(200)
      expect(again.json.data?.requestId).toBe(first.json.data?.requestId)
      // A voucher over the old cumulative for another call: the corrective 402, naming our charged total and voucher.
      const stale = yield* voucherCall(baseUrl, agentId, "second", { payer, config, maxClaimable: PRICE, accepted })
      expect(stale.status).toBe(402)
      expect(stale.required?.error).toBe("invalid_batch_settlement_evm_cumulative_amount_mismatch")
      const offer = stale.required?.accepts.find((a) => a.scheme === "batch-settlement")
      expect(offer?.extra).toMatchObject({ channelState: { channelId, chargedCumulativeAmount: PRICE.toString() }, voucherState: { signedMaxClaimable: PRICE.toString() } })
      // Signed over our total, it pays.
      const second = yield* voucherCall(baseUrl, agentId, "second", { payer, config, maxClaimable: 2n * PRICE, accepted })
      expect(second.status).toBe(200)
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: (2n * PRICE).toString(), status: "open" })
      expect(yield* chargesOf(channelId)).toEqual([{ status: "kept", amount: PRICE.toString() }, { status: "kept", amount: PRICE.toString() }])
    }))

  it.scoped("a foreign channel config, a voucher above the balance and an unknown channel are refused, nothing charged", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(5), agent.url)
      const payer = devAccount(3)
      const accepted = yield* channelOffer(baseUrl, agentId)
      const stranger = devAccount(6).address
      for (const [overrides, reason] of [[{ receiver: stranger }, "invalid_batch_settlement_evm_receiver_mismatch"], [{ receiverAuthorizer: stranger }, "invalid_batch_settlement_evm_receiver_authorizer_mismatch"]] as const) {
        const refused = yield* voucherCall(baseUrl, agentId, "foreign", { payer, config: channelConfigOf(payer, saltOf("foreign"), overrides), maxClaimable: PRICE, accepted })
        expect(refused.status).toBe(402)
        expect(refused.json.error?.details["reason"]).toBe(reason)
      }
      const unknown = yield* voucherCall(baseUrl, agentId, "unknown", { payer, config: channelConfigOf(payer, saltOf(`never opened ${Date.now()}`)), maxClaimable: PRICE, accepted })
      expect(unknown.json.error?.details["reason"]).toBe("invalid_batch_settlement_evm_channel_not_found")

      const salt = saltOf(`small ${Date.now()}`)
      const { config, channelId } = yield* openTestChannel(sql, payer, PRICE + 5_000n, salt)
      expect((yield* voucherCall(baseUrl, agentId, "fits", { payer, config, maxClaimable: PRICE, accepted })).status).toBe(200)
      const over = yield* voucherCall(baseUrl, agentId, "over", { payer, config, maxClaimable: 2n * PRICE, accepted })
      expect(over.status).toBe(402)
      expect(over.json.error?.details["reason"]).toBe("invalid_batch_settlement_evm_cumulative_exceeds_balance")
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: PRICE.toString(), status: "open" })
    }))

  it.scoped("a failed call costs nothing: its charge goes back to the channel before any claim, and the next voucher builds on the old total", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "model crashed" } })
      const agentId = yield* registerAgent(devAccount(8), agent.url)
      const payer = devAccount(3)
      const salt = saltOf(`failed ${Date.now()}`)
      const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, salt)
      const accepted = yield* channelOffer(baseUrl, agentId)
      const before = yield* receivable
      const failed = yield* voucherCall(baseUrl, agentId, "fails", { payer, config, maxClaimable: PRICE, accepted })
      expect(failed.status).toBe(502)
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: "0", status: "open" })
      expect(yield* chargesOf(channelId)).toEqual([{ status: "returned", amount: PRICE.toString() }])
      expect(yield* receivable).toBe(before)
      agent.setBehaviour("echo")
      const next = yield* voucherCall(baseUrl, agentId, "works", { payer, config, maxClaimable: PRICE, accepted })
      expect(next.status).toBe(200)
      expect(decodePaymentResponseHeader(next.response!)).toMatchObject({ extra: { chargedAmount: PRICE.toString() } })
    }))

  it.scoped("the official client's first call deposits through the service (sent by the treasury, included first), later calls are vouchers only", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(9), agent.url)
      const payer = devAccount(3)
      const salt = saltOf(`deposit ${Date.now()}`)
      const { fetch: pay } = channelFetch(payer, { salt })
      const channelId = computeChannelId(channelConfigOf(payer, salt), NETWORK).toLowerCase()
      const payerBefore = yield* Effect.promise(() => publicClient().readContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "balanceOf", args: [payer.address] }))
      for (let i = 0; i < 3; i++) {
        const response = yield* Effect.promise(() => pay(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: body(agentId, `d${i}`) }))
        if (response.status !== 200) throw new Error(`${response.status}: ${yield* Effect.promise(() => response.text())}`)
      }
      const [row] = yield* sql<{ balance: string; chargedCumulative: string; status: string }>`SELECT balance::text, charged_cumulative::text, status FROM channels WHERE id = ${channelId}`.pipe(Effect.orDie)
      // The offer suggests 100 calls' worth; the deposit left the payer's wallet for the contract, once.
      expect(row).toEqual({ balance: (100n * PRICE).toString(), chargedCumulative: (3n * PRICE).toString(), status: "open" })
      const deposits = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM channel_deposits WHERE channel_id = ${channelId}`.pipe(Effect.orDie)
      expect(deposits[0]?.n).toBe("1")
      const payerAfter = yield* Effect.promise(() => publicClient().readContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "balanceOf", args: [payer.address] }))
      expect(payerBefore - payerAfter).toBe(100n * PRICE)
    }))

  it.scoped("a metered call charges what was used under the voucher's ceiling: the channel keeps that, the rest stays the payer's", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* meteredAgent
      const tokens = { id: "tokens", name: "Tokens", description: "per-token", pricing: { model: "per-token", basePrice: "0.002", currency: "USDC", maxTokens: 10_000 } }
      const agentId = yield* registerAgent(devAccount(1), agent.url, { capabilities: [tokens] })
      const payer = devAccount(3)
      const salt = saltOf(`metered ${Date.now()}`)
      const { config, channelId } = yield* openTestChannel(sql, payer, DEPOSIT, salt)
      const offer = yield* Effect.promise(async () => {
        const r = await fetch(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ targetAgentId: agentId, capabilityId: "tokens", input: { units: "2500" } }) })
        return decodePaymentRequiredHeader(r.headers.get("PAYMENT-REQUIRED")!).accepts.find((a) => a.scheme === "batch-settlement")!
      })
      const ceiling = BigInt(offer.amount)
      const header = encodeHeaderJson({
        x402Version: 2,
        accepted: offer,
        payload: { type: "voucher", channelConfig: config, voucher: yield* Effect.promise(() => signVoucher(payer, computeChannelId(config, NETWORK), ceiling.toString(), NETWORK)) }
      })
      const response = yield* Effect.promise(() => fetch(`${baseUrl}/api/v1/execute`, {
        method: "POST",
        headers: { "content-type": "application/json", "PAYMENT-SIGNATURE": header },
        body: JSON.stringify({ targetAgentId: agentId, capabilityId: "tokens", input: { units: "2500" } })
      }))
      expect(response.status).toBe(200)
      const json = (yield* Effect.promise(() => response.json())) as { data: { requestId: string } }
      const [execution] = yield* sql<{ price: string; authorized: string }>`SELECT price::text, authorized::text FROM executions WHERE id = ${json.data.requestId}`.pipe(Effect.orDie)
      const charged = BigInt(execution!.price)
      expect(charged).toBeLessThan(ceiling)
      expect(BigInt(execution!.authorized)).toBe(ceiling)
      expect(decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!)).toMatchObject({
        extra: { chargedAmount: charged.toString(), channelState: { chargedCumulativeAmount: charged.toString() } }
      })
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: charged.toString(), status: "open" })
      expect(yield* chargesOf(channelId)).toEqual([{ status: "kept", amount: ceiling.toString() }])
      // No remainder goes out on chain: it never left the channel.
      const remainders = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM remainders WHERE execution_id = ${json.data.requestId}`.pipe(Effect.orDie)
      expect(remainders[0]?.n).toBe("0")
    }))

  it.scoped("the SDK pays by channel: the first call deposits, the next is a voucher, closeChannel gives back what was not spent in one transaction", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(6), agent.url)
      const payer = devAccount(3)
      const salt = saltOf(`sdk ${Date.now()}`)
      const market = marketplace({ baseUrl, wallet: payer, channel: { deposit: "0.50", salt } })
      const usdc = () => Effect.promise(() => publicClient().readContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "balanceOf", args: [payer.address] }))
      const before = yield* usdc()
      for (const text of ["one", "two"]) {
        const result = yield* Effect.promise(() => market.execute(agentId, "echo", { text }))
        expect(result.status).toBe("completed")
      }
      const channelId = computeChannelId(channelConfigOf(payer, salt), NETWORK).toLowerCase()
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: (2n * PRICE).toString(), status: "open" })
      const closed = yield* Effect.promise(() => market.closeChannel())
      expect(closed?.transaction).toMatch(/^0x[0-9a-f]{64}$/)
      expect(closed?.refunded).toBe((500_000n - 2n * PRICE).toString())
      // The payer paid exactly its two calls: the deposit went in, the unspent part came back.
      expect(before - (yield* usdc())).toBe(2n * PRICE)
      const [row] = yield* sql<{ status: string; claimedOnChain: string }>`SELECT status, claimed_on_chain::text FROM channels WHERE id = ${channelId}`.pipe(Effect.orDie)
      expect(row).toEqual({ status: expect.stringMatching(/^(drained|closed)$/), claimedOnChain: (2n * PRICE).toString() })
    }))

  it.scoped("over MCP: the paid tool's challenge offers the channel, and the official client's voucher in _meta pays the call", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(7), agent.url)
      const payer = devAccount(3)
      const salt = saltOf(`mcp ${Date.now()}`)
      const { channelId } = yield* openTestChannel(sql, payer, DEPOSIT, salt)
      const { client } = yield* mcpSession("channel-test")
      const { scheme } = channelFetch(payer, { salt })
      const args = { targetAgentId: agentId, capabilityId: "echo", input: { text: "over mcp" } }
      const result = yield* Effect.promise(async () => {
        const first = await client.callTool({ name: "execute", arguments: args })
        const required = first.structuredContent as { accepts: ReadonlyArray<{ scheme: string }> }
        const offer = required.accepts.find((a) => a.scheme === "batch-settlement")
        if (offer === undefined) throw new Error(`no channel offer: ${JSON.stringify(first.structuredContent)}`)
        const created = await scheme.createPaymentPayload(2, offer as Parameters<typeof scheme.createPaymentPayload>[1])
        return client.callTool({ name: "execute", arguments: args, _meta: { "x402/payment": { x402Version: 2, accepted: offer, payload: created.payload } } })
      })
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
      expect(result._meta?.["x402/payment-response"]).toMatchObject({ success: true, transaction: "", extra: { chargedAmount: PRICE.toString() } })
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: PRICE.toString(), status: "open" })
    }))
})
