// Metered pricing end to end (issue 28 item 2): per-token, per-second and dynamic capabilities charge what was used
// (usage 0, some, over the maximum), the 402 asks for the maximum, remainders go back on chain in batched treasury
// transactions (each once, ledger = chain), or stay as the payer's credit (read and withdrawn with a wallet signature);
// registration refuses a metered capability without its maximum.
import { afterAll, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { decodeXPaymentResponse } from "x402-fetch"
import { type ExecutionReceipt, verifyReceipt } from "../../sdk/src/receipts.js"
import { fetchMarketplaceKey } from "../../sdk/src/requestSignature.js"
import { creditMessage, creditTypes, type CreditAction } from "../../services/remainders/Credits.js"
import { payoutDomain } from "../../services/withdrawals/PayoutAuthorization.js"
import { authorizationUsed, call, devAccount, paidCall, TREASURY, usdcBalance, walletAuth } from "../support/clients.js"
import { capability, registration } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { startMeteredAgent } from "../support/meteredAgent.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const tokens = capability({
  id: "tokens", name: "Tokens", description: "per-token", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "per-token", basePrice: "0.002", currency: "USDC", maxTokens: 10_000 }
})
const seconds = capability({
  id: "seconds", name: "Seconds", description: "per-second", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "per-minute", basePrice: "0.001", currency: "USDC", per: "second", maxDurationSeconds: 2 }
})
const quoted = capability({
  id: "quoted", name: "Quoted", description: "dynamic", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "dynamic", basePrice: "0.01", currency: "USDC", maxPrice: "0.05" }
})
const TOKENS_MAX = 21_000n // 0.001 fee + 10,000 tokens at 0.002 per 1,000
const SECONDS_MAX = 3_000n // 0.001 fee + 2 s at 0.001
const QUOTED_MAX = 51_000n // 0.001 fee + maxPrice 0.05

const balance = (a: PrivateKeyAccount) => Effect.promise(() => usdcBalance(a.address))
const tick = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))

/** Polls until every remainder of `ids` (those owed: returned > 0) is confirmed on chain. */
const remaindersConfirmed = (ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const { sql } = yield* TestEnv
    for (let i = 0; i < 1_200; i++) {
      const [row] = yield* sql<{ open: string }>`SELECT count(*)::text AS open FROM remainders WHERE execution_id IN ${sql.in([...ids])} AND status <> 'confirmed'`
      if (row?.open === "0") return
      yield* tick
    }
    return yield* Effect.dieMessage("remainders not confirmed in time")
  })

interface Metering { unitsUsed: string; capped: boolean; authorized: string; charged: string; returned: string; remainder: { to: string } }

const micros = (usdc: string) => BigInt(Math.round(Number(usdc) * 1e6))

/** A paid metered call: its answer's metering, receipt (verified with the published key) and request id. */
const meteredCall = (payer: PrivateKeyAccount, agentId: string, capabilityId: string, input: Record<string, unknown>, headers: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const response = yield* Effect.promise(() => paidCall(payer, `${baseUrl}/api/v1/execute`, { json: { targetAgentId: agentId, capabilityId, input }, headers }))
    expect(response.status, JSON.stringify(response.body)).toBe(200)
    const settlement = decodeXPaymentResponse(response.headers.get("x-payment-response") ?? "") as { extensions?: { receipt?: ExecutionReceipt } }
    const receipt = settlement.extensions?.receipt
    expect(receipt).toBeDefined()
    const key = yield* Effect.promise(() => fetchMarketplaceKey(baseUrl))
    expect(verifyReceipt(receipt!, key)).toBe(true)
    const metering = response.body.data.metering as Metering
    expect(BigInt(receipt!.charged)).toBe(micros(metering.charged))
    expect(BigInt(receipt!.returned)).toBe(micros(metering.returned))
    expect(BigInt(receipt!.authorized)).toBe(micros(metering.authorized))
    expect(receipt!.unitsUsed).toBe(metering.unitsUsed)
    return { requestId: String(response.body.data.requestId), metering, receipt: receipt!, executionTime: Number(response.body.data.executionTime) }
  })

const signCredit = (payer: PrivateKeyAccount, action: CreditAction, amount: bigint, signedAt = Date.now()) =>
  Effect.gen(function* () {
    const { chain } = yield* TestEnv
    const signature = yield* Effect.promise(() =>
      payer.signTypedData({ domain: payoutDomain(chain.chainId, chain.treasury), types: creditTypes, primaryType: "PayerCredit", message: creditMessage(action, payer.address, amount, signedAt) }))
    return { "x-payer-signature": signature, "x-payer-signed-at": String(signedAt) }
  })

layer(TestApp({ EXECUTION_TIMEOUT_MS: "10000", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }), { excludeTestServices: true, timeout: 240_000 })("metered pricing", (it) => {
  // One agent (owner: dev account 1) with the three metered capabilities, for every test of the file.
  let shared: { readonly agent: Awaited<ReturnType<typeof startMeteredAgent>>; readonly agentId: string } | undefined
  afterAll(() => shared?.agent.close())
  const agentOnce = Effect.gen(function* () {
    if (shared !== undefined) return shared
    const agent = yield* Effect.promise(startMeteredAgent)
    const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium", capabilities: [tokens, seconds, quoted] })
    shared = { agent, agentId }
    return shared
  })

  it.scoped("registration refuses a metered capability without its maximum (VALIDATION_ERROR naming the field), before any payment", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
        [{ model: "per-token", basePrice: "0.002", currency: "USDC" }, "maxTokens"],
        [{ model: "per-minute", basePrice: "0.002", currency: "USDC" }, "maxDurationSeconds"],
        [{ model: "dynamic", basePrice: "0.002", currency: "USDC" }, "maxPrice"],
        [{ model: "per-request", basePrice: "0.002", currency: "USDC", maxTokens: 10 }, "maxTokens"]
      ]
      for (const [pricing, field] of cases) {
        const response = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents`, { method: "POST", json: registration(devAccount(9), { capabilities: [capability({ pricing })] }) }))
        expect(response.status).toBe(400)
        expect(response.body.error?.code).toBe("VALIDATION_ERROR")
        expect(JSON.stringify(response.body.error?.details)).toContain(field)
      }
    }))

  it.scoped("an update that makes a capability metered without its maximum is refused the same way", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { agentId } = yield* agentOnce
      const owner = devAccount(1)
      const response = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/agents/${agentId}`, {
          method: "PATCH",
          json: { capabilities: [tokens, { ...seconds, pricing: { model: "per-minute", basePrice: "0.001", currency: "USDC" } }] },
          headers: await walletAuth(owner, agentId)
        }))
      expect(response.status).toBe(400)
      expect(response.body.error?.code).toBe("VALIDATION_ERROR")
      expect(JSON.stringify(response.body.error?.details)).toContain("maxDurationSeconds")
    }))

  it.scoped("the 402 asks for the maximum: per-token, per-second and dynamic (after the agent's quote)", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { agent, agentId } = yield* agentOnce
      for (const [capabilityId, max] of [["tokens", TOKENS_MAX], ["seconds", SECONDS_MAX], ["quoted", QUOTED_MAX]] as const) {
        const response = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId, input: { quote: "0.03" } } }))
        expect(response.status).toBe(402)
        expect(BigInt((response.body as unknown as { accepts: Array<{ maxAmountRequired: string }> }).accepts[0]?.maxAmountRequired ?? "0")).toBe(max)
      }
      expect(agent.quotes.length).toBeGreaterThanOrEqual(1)
      // A quote above maxPrice: refused, nothing charged.
      const refused = yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "quoted", input: { quote: "0.06" } })
      expect(refused.status).toBe(502)
      expect(refused.body.error?.code).toBe("QUOTE_FAILED")
    }))

  it.scoped("per-token: usage 0, some and over the maximum are charged the fee, the tokens used, the maximum; the payer's balance moves by exactly the charges", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const payer = devAccount(2)
      const before = yield* balance(payer)
      const none = yield* meteredCall(payer, agentId, "tokens", { units: "0" })
      const some = yield* meteredCall(payer, agentId, "tokens", { units: "2500" })
      const over = yield* meteredCall(payer, agentId, "tokens", { units: "50000" })
      const unreported = yield* meteredCall(payer, agentId, "tokens", {})
      expect(none.metering).toMatchObject({ unitsUsed: "0", capped: false, charged: "0.001000", returned: "0.020000" })
      expect(some.metering).toMatchObject({ unitsUsed: "2500", capped: false, charged: "0.006000", returned: "0.015000" })
      expect(over.metering).toMatchObject({ unitsUsed: "10000", capped: true, charged: "0.021000", returned: "0.000000" })
      expect(unreported.metering).toMatchObject({ unitsUsed: "0", charged: "0.001000" })
      // The owner is told: the agent's view carries the warning, and one agent.usage_missing event names the call.
      const { baseUrl, sql: db } = yield* TestEnv
      const view = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${agentId}`))
      expect(view.body.data.warnings).toEqual([expect.objectContaining({ code: "USAGE_NOT_REPORTED", capabilityId: "tokens", requestId: unreported.requestId })])
      const missing = yield* db<{ payload: { requestId: string } }>`SELECT payload FROM outbox_events WHERE event_type = 'agent.usage_missing' AND agent_id = ${agentId}::uuid`
      expect(missing.map((e) => e.payload.requestId)).toEqual([unreported.requestId])
      // A second omission within the hour is not announced again; a reported call lifts the warning.
      const again = yield* meteredCall(payer, agentId, "tokens", {})
      expect((yield* db<{ n: number }>`SELECT count(*)::int AS n FROM outbox_events WHERE event_type = 'agent.usage_missing' AND agent_id = ${agentId}::uuid`)[0]?.n).toBe(1)
      const reported = yield* meteredCall(payer, agentId, "tokens", { units: "1" })
      const lifted = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${agentId}`))
      expect(lifted.body.data.warnings).toBeUndefined()
      expect(some.receipt).toMatchObject({ unit: "token", unitPrice: "2000", authorized: "21000", charged: "6000", returned: "15000", platformFee: "1000" })
      const calls = [none, some, over, unreported]
      yield* remaindersConfirmed([...calls, again, reported].map((c) => c.requestId))
      const charged = [...calls, again, reported].reduce((sum, c) => sum + BigInt(c.receipt.charged), 0n)
      expect(before - (yield* balance(payer))).toBe(charged)
      // The agent earned 85% of the agent fees (premium: released at once).
      const { sql } = yield* TestEnv
      const [earned] = yield* sql<{ sum: string }>`SELECT sum(agent_earnings)::text AS sum FROM executions WHERE id IN ${sql.in(calls.map((c) => c.requestId))}`
      expect(BigInt(earned!.sum)).toBe((5_000n - 750n) + (20_000n - 3_000n))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("per-second: agent time measured by the service, per started second, capped at maxDurationSeconds", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const payer = devAccount(3)
      const before = yield* balance(payer)
      const quick = yield* meteredCall(payer, agentId, "seconds", { units: "999" })
      const slower = yield* meteredCall(payer, agentId, "seconds", { delayMs: 1_100 })
      const over = yield* meteredCall(payer, agentId, "seconds", { delayMs: 2_600 })
      const expected = (ms: number) => { const u = BigInt(Math.ceil(ms / 1_000)); return u > 2n ? 2n : u }
      // The agent's report is ignored for agent time; the units follow the stored duration.
      expect(BigInt(quick.metering.unitsUsed)).toBe(expected(quick.executionTime))
      expect(quick.metering.unitsUsed).toBe("1")
      expect(BigInt(slower.metering.unitsUsed)).toBe(expected(slower.executionTime))
      expect(BigInt(slower.metering.unitsUsed)).toBeGreaterThanOrEqual(2n)
      expect(over.metering).toMatchObject({ unitsUsed: "2", capped: true, returned: "0.000000" })
      for (const c of [quick, slower, over]) expect(BigInt(c.receipt.charged)).toBe(1_000n + 1_000n * BigInt(c.metering.unitsUsed))
      const calls = [quick, slower, over]
      yield* remaindersConfirmed(calls.map((c) => c.requestId))
      expect(before - (yield* balance(payer))).toBe(calls.reduce((sum, c) => sum + BigInt(c.receipt.charged), 0n))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("dynamic: the quote caps the charge; usage 0, some, over the quote, and unreported (the quote)", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const payer = devAccount(4)
      const before = yield* balance(payer)
      const none = yield* meteredCall(payer, agentId, "quoted", { quote: "0.03", units: "0" })
      const some = yield* meteredCall(payer, agentId, "quoted", { quote: "0.03", units: "10000" })
      const over = yield* meteredCall(payer, agentId, "quoted", { quote: "0.03", units: "45000" })
      const unreported = yield* meteredCall(payer, agentId, "quoted", { quote: "0.03" })
      expect(none.metering).toMatchObject({ charged: "0.001000", returned: "0.050000", capped: false })
      expect(some.metering).toMatchObject({ charged: "0.011000", returned: "0.040000" })
      expect(over.metering).toMatchObject({ unitsUsed: "30000", charged: "0.031000", returned: "0.020000", capped: true })
      expect(unreported.metering).toMatchObject({ unitsUsed: "30000", charged: "0.031000" })
      const calls = [none, some, over, unreported]
      yield* remaindersConfirmed(calls.map((c) => c.requestId))
      expect(before - (yield* balance(payer))).toBe(calls.reduce((sum, c) => sum + BigInt(c.receipt.charged), 0n))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a metered call that failed and was retried on its payment is charged what the retry used, once", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { agentId } = yield* agentOnce
      const payer = devAccount(8)
      const before = yield* balance(payer)
      const failed = yield* execute(payer, { targetAgentId: agentId, capabilityId: "tokens", input: { units: "3000", failFirst: "retry-1" } })
      expect(failed.status).toBe(502)
      const requestId = String(failed.body.error?.details.requestId)
      const retried = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute/${requestId}/retry`, { method: "POST", headers: { "X-PAYMENT": failed.headers.get("x-payment-used") ?? "" } }))
      expect(retried.status).toBe(200)
      expect(retried.body.data.metering).toMatchObject({ unitsUsed: "3000", charged: "0.007000", returned: "0.014000", capped: false })
      yield* remaindersConfirmed([requestId])
      expect(before - (yield* balance(payer))).toBe(7_000n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("100 concurrent metered calls: their remainders go back in a few batched transactions, each once; balances move by the charges; ledger = chain", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const { sql } = yield* TestEnv
      const payers = [6, 7, 8, 9].map(devAccount)
      const before = yield* Effect.forEach(payers, balance)
      const results = yield* Effect.forEach(
        Array.from({ length: 100 }, (_, i) => i),
        (i) => meteredCall(payers[i % payers.length]!, agentId, "tokens", { units: String(1_000 + i) }),
        { concurrency: "unbounded" }
      )
      const ids = results.map((r) => r.requestId)
      yield* remaindersConfirmed(ids)
      const rows = yield* sql<{ id: string; treasuryTxId: string; authNonce: string; amount: string; toAddress: string }>`
        SELECT id, treasury_tx_id, auth_nonce, amount::text, to_address FROM remainders WHERE execution_id IN ${sql.in(ids)}`
      expect(rows.length).toBe(100)
      const batches = new Set(rows.map((r) => r.treasuryTxId))
      expect(batches.size).toBeLessThanOrEqual(20)
      const perBatch = [...batches].map((b) => rows.filter((r) => r.treasuryTxId === b).length)
      expect(Math.max(...perBatch)).toBeGreaterThan(1)
      console.info(`100 metered calls: remainders in ${batches.size} transactions of ${perBatch.join(", ")}`)
      const [sent] = yield* sql<{ n: string; batches: string }>`
        SELECT count(*)::text AS n, count(DISTINCT tx_hash)::text AS batches FROM ledger_transfers WHERE kind = 'remainder_sent' AND subject_id IN ${sql.in(ids)}`
      expect(sent).toEqual({ n: "100", batches: String(batches.size) })
      // On chain: each remainder's authorization used (once: a nonce pays at most once).
      for (const r of rows.slice(0, 10)) expect(yield* Effect.promise(() => authorizationUsed(TREASURY, r.authNonce as `0x${string}`))).toBe(true)
      for (const [i, payer] of payers.entries()) {
        const charged = results.filter((_, k) => k % payers.length === i).reduce((sum, r) => sum + BigInt(r.receipt.charged), 0n)
        expect(before[i]! - (yield* balance(payer))).toBe(charged)
      }
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("quotes before payment are bounded: the same unpaid request ten times asks the agent once (the quote cache)", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { agent, agentId } = yield* agentOnce
      const input = { quote: "0.02", unique: `cache-${Date.now()}` }
      const asked = () => agent.quotes.filter((q) => JSON.stringify(q) === JSON.stringify(input)).length
      for (let i = 0; i < 10; i++) {
        const response = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "quoted", input } }))
        expect(response.status).toBe(402)
      }
      expect(asked()).toBe(1)
    }))

  it.scoped("X-Remainder: credit keeps the remainder as the payer's credit; the payer reads and withdraws it with its wallet signature", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const { agentId } = yield* agentOnce
      const payer = devAccount(5)
      const before = yield* balance(payer)
      const kept = yield* meteredCall(payer, agentId, "tokens", { units: "2500" }, { "x-remainder": "credit" })
      expect(kept.metering).toMatchObject({ charged: "0.006000", returned: "0.015000", remainder: { to: "credit" } })
      const [none] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM remainders WHERE execution_id = ${kept.requestId}`
      expect(none?.n).toBe("0")
      expect(before - (yield* balance(payer))).toBe(21_000n)
      const url = `${baseUrl}/api/v1/payers/${payer.address}/credit`
      const unsigned = yield* Effect.promise(() => call(url))
      expect(unsigned.status).toBe(401)
      const readHeaders = yield* signCredit(payer, "read", 0n)
      const read = yield* Effect.promise(() => call(url, { headers: readHeaders }))
      expect(read.body.data).toMatchObject({ credit: "0.015000" })
      // A stranger's signature cannot withdraw it; too much is refused; the payer's withdrawal goes out in a batch.
      const stranger = yield* signCredit(devAccount(6), "withdraw", 0n)
      const refused = yield* Effect.promise(() => call(`${url}/withdraw`, { method: "POST", json: {}, headers: stranger }))
      expect(refused.status).toBe(401)
      const tooMuch = yield* signCredit(payer, "withdraw", 16_000n)
      const over = yield* Effect.promise(() => call(`${url}/withdraw`, { method: "POST", json: { amount: "0.016" }, headers: tooMuch }))
      expect(over.body.error?.code).toBe("INSUFFICIENT_CREDIT")
      const signed = yield* signCredit(payer, "withdraw", 0n)
      const withdrawn = yield* Effect.promise(() => call(`${url}/withdraw`, { method: "POST", json: {}, headers: signed }))
      expect(withdrawn.body.data).toMatchObject({ withdrawn: "0.015000", credit: "0.000000", status: "pending" })
      const replayed = yield* Effect.promise(() => call(`${url}/withdraw`, { method: "POST", json: {}, headers: signed }))
      expect(replayed.body.error?.code).toBe("AUTH_SIGNATURE_REUSED")
      for (let i = 0; i < 1_200; i++) {
        const [open] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM remainders WHERE to_address = ${payer.address.toLowerCase()} AND source = 'credit_withdrawal' AND status <> 'confirmed'`
        if (open?.n === "0") break
        yield* tick
      }
      expect(before - (yield* balance(payer))).toBe(6_000n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
