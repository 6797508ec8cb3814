// Credit pays for calls (issue 28 item 2): a metered call's remainder kept as credit (X-Remainder: credit) pays the next
// calls with X-Credit-Payment (the wallet's EIP-712 PayerCreditSpend over the call), flat and metered; the receipt says
// funding "credit"; a short credit, an expired, replayed, re-bound or foreign signature is a 402 that moves nothing; a
// failed call goes back to the credit; 20 concurrent calls against a credit for 10: exactly 10 pass; ledger = chain.
import { afterAll, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import type { PrivateKeyAccount } from "viem/accounts"
import { type ExecutionReceipt, verifyReceipt } from "../../sdk/src/receipts.js"
import { fetchMarketplaceKey } from "../../sdk/src/requestSignature.js"
import { creditSpendTypes, inputSha256 } from "../../services/remainders/CreditSpends.js"
import { payoutDomain } from "../../services/withdrawals/PayoutAuthorization.js"
import { call, devAccount, paidCall, usdcBalance } from "../support/clients.js"
import { capability } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { setLimits } from "../support/limits.js"
import { startMeteredAgent } from "../support/meteredAgent.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const tokens = capability({
  id: "tokens", name: "Tokens", description: "per-token", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "per-token", basePrice: "0.002", currency: "USDC", maxTokens: 10_000 }
})
const flat = capability({
  id: "flat", name: "Flat", description: "per call", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "per-request", basePrice: "0.001", currency: "USDC" }
})
const quoted = capability({
  id: "quoted", name: "Quoted", description: "dynamic", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "dynamic", basePrice: "0.01", currency: "USDC", maxPrice: "0.05" }
})
const FLAT_PRICE = 2_000n // 0.001 agent fee + 0.001 platform fee

interface SpendOptions { readonly maxAmount?: bigint; readonly validBefore?: number; readonly signer?: PrivateKeyAccount }

/** X-Credit-Payment for one call: base64 JSON of the payer's PayerCreditSpend signature over it. */
const creditHeader = (payer: PrivateKeyAccount, agentId: string, capabilityId: string, input: unknown, options: SpendOptions = {}) =>
  Effect.gen(function* () {
    const { chain } = yield* TestEnv
    const nonce = `0x${randomBytes(32).toString("hex")}` as const
    const maxAmount = options.maxAmount ?? 100_000n
    const validBefore = options.validBefore ?? Math.floor(Date.now() / 1000) + 300
    const signature = yield* Effect.promise(() =>
      (options.signer ?? payer).signTypedData({
        domain: payoutDomain(chain.chainId, chain.treasury),
        types: creditSpendTypes,
        primaryType: "PayerCreditSpend",
        message: { payer: payer.address, agentId, capabilityId, inputSha256: inputSha256(input), maxAmount, nonce, validBefore: BigInt(validBefore) }
      }))
    return Buffer.from(JSON.stringify({ payer: payer.address, maxAmount: maxAmount.toString(), nonce, validBefore, signature })).toString("base64")
  })

const creditCall = (header: string, body: Record<string, unknown>) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() => call(`${baseUrl}/api/v1/execute`, { method: "POST", json: body, headers: { "x-credit-payment": header } })))

/** The payer's credit in micro-USDC, read from the ledger (the account's balance, credit-normal). */
const creditOf = (payer: PrivateKeyAccount) =>
  Effect.gen(function* () {
    const { sql } = yield* TestEnv
    const [row] = yield* sql<{ credit: string }>`
      SELECT (-COALESCE(SUM(amount), 0))::text AS credit FROM ledger_entries WHERE account_id = ${`credit:${payer.address.toLowerCase()}`}`
    return BigInt(row?.credit ?? "0")
  })

const balance = (a: PrivateKeyAccount) => Effect.promise(() => usdcBalance(a.address))

/** Earns credit: a per-token call reporting no tokens, paid with x402, its remainder kept (20,000 micro-USDC). */
const earn = (payer: PrivateKeyAccount, agentId: string) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const response = yield* Effect.promise(() =>
      paidCall(payer, `${baseUrl}/api/v1/execute`, { json: { targetAgentId: agentId, capabilityId: "tokens", input: { units: "0" } }, headers: { "x-remainder": "credit" } }))
    expect(response.status, JSON.stringify(response.body)).toBe(200)
    expect(response.body.data.metering).toMatchObject({ returned: "0.020000", remainder: { to: "credit" } })
  })

const ledgerBalanced = Effect.gen(function* () {
  const { sql } = yield* TestEnv
  const [row] = yield* sql<{ total: string }>`SELECT COALESCE(SUM(amount), 0)::text AS total FROM ledger_entries`
  return BigInt(row?.total ?? "1")
})

layer(TestApp({ EXECUTION_TIMEOUT_MS: "10000", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }), { excludeTestServices: true, timeout: 240_000 })("credit pays for calls", (it) => {
  let shared: { readonly agent: Awaited<ReturnType<typeof startMeteredAgent>>; readonly agentId: string } | undefined
  afterAll(() => shared?.agent.close())
  const agentOnce = Effect.gen(function* () {
    if (shared !== undefined) return shared
    const agent = yield* Effect.promise(startMeteredAgent)
    const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium", capabilities: [tokens, flat, quoted] })
    shared = { agent, agentId }
    return shared
  })

  it.scoped("credit earned by a metered call pays for flat and metered calls; the receipt says funding credit; the wallet does not move", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const { agentId } = yield* agentOnce
      const payer = devAccount(7)
      yield* earn(payer, agentId)
      yield* earn(payer, agentId)
      expect(yield* creditOf(payer)).toBe(40_000n)
      const onChain = yield* balance(payer)

      // A flat call from credit.
      const flatInput = { n: 1 }
      const header = yield* creditHeader(payer, agentId, "flat", flatInput)
      const paid = yield* creditCall(header, { targetAgentId: agentId, capabilityId: "flat", input: flatInput })
      expect(paid.status, JSON.stringify(paid.body)).toBe(200)
      expect(paid.body.data).toMatchObject({ status: "completed", funding: "credit", cost: { total: "0.002000" } })
      expect(paid.headers.get("x-payment-used")).toBe(header)
      const receipt = JSON.parse(Buffer.from(paid.headers.get("x-credit-receipt") ?? "", "base64").toString("utf8")) as ExecutionReceipt & { funding?: string }
      expect(receipt).toMatchObject({ funding: "credit", transaction: "", charged: "2000", returned: "0", payer: payer.address.toLowerCase() })
      expect(verifyReceipt(receipt, yield* Effect.promise(() => fetchMarketplaceKey(baseUrl)))).toBe(true)
      expect(yield* creditOf(payer)).toBe(38_000n)
      // Read back later with the header as proof (status and receipt).
      const requestId = String(paid.body.data.requestId)
      const status = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}`, { headers: { "x-payment": header } }))
      expect(status.body.data).toMatchObject({ output: { ok: true }, funding: "credit" })
      const again = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}/receipt`, { headers: { "x-payment": header } }))
      expect(again.body.data).toEqual(receipt)
      const [tx] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${requestId}`
      const detail = yield* Effect.promise(() => call(`${baseUrl}/api/v1/payments/tx/${tx?.transactionId}`))
      expect(detail.body.data).toMatchObject({ funding: "credit", amount: "0.002000", settlement: { status: "settled", txHash: null } })

      // A metered call from credit: holds the maximum (21,000), charges 6,000, the remainder back to the credit.
      const meteredInput = { units: "2500" }
      const metered = yield* creditCall(yield* creditHeader(payer, agentId, "tokens", meteredInput), { targetAgentId: agentId, capabilityId: "tokens", input: meteredInput })
      expect(metered.status, JSON.stringify(metered.body)).toBe(200)
      expect(metered.body.data).toMatchObject({ funding: "credit", metering: { charged: "0.006000", returned: "0.015000", remainder: { to: "credit" } } })
      expect(yield* creditOf(payer)).toBe(32_000n)

      // Short: a dynamic call holds its maximum (51,000) > 32,000: 402, nothing moved, no execution, agent not called.
      const [before] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM executions`
      const short = yield* creditCall(yield* creditHeader(payer, agentId, "quoted", { quote: "0.01" }), { targetAgentId: agentId, capabilityId: "quoted", input: { quote: "0.01" } })
      expect(short.status).toBe(402)
      expect(short.body.error?.details).toMatchObject({ reason: "insufficient_credit", credit: "0.032000" })
      const [after] = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM executions`
      expect(after?.n).toBe(before?.n)
      expect(yield* creditOf(payer)).toBe(32_000n)
      expect(yield* balance(payer)).toBe(onChain)
    }))

  it.scoped("expired, replayed, re-bound, too-low and foreign credit signatures are refused with 402; nothing moves", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const payer = devAccount(7)
      const credit = yield* creditOf(payer)
      const body = { targetAgentId: agentId, capabilityId: "flat", input: { n: 2 } }
      const refusals: Array<readonly [string, string]> = []
      const expired = yield* creditHeader(payer, agentId, "flat", body.input, { validBefore: Math.floor(Date.now() / 1000) - 1 })
      refusals.push([expired, "credit_payment_expired"])
      refusals.push([yield* creditHeader(payer, agentId, "flat", body.input, { signer: devAccount(6) }), "credit_signature_invalid"])
      refusals.push([yield* creditHeader(payer, agentId, "flat", { n: 3 }), "credit_signature_invalid"])
      refusals.push([yield* creditHeader(payer, agentId, "flat", body.input, { maxAmount: FLAT_PRICE - 1n }), "credit_max_amount_too_low"])
      refusals.push([Buffer.from("{}").toString("base64"), "credit_payment_invalid"])
      for (const [header, reason] of refusals) {
        const response = yield* creditCall(header, body)
        expect(response.status, reason).toBe(402)
        expect(response.body.error?.details).toMatchObject({ reason })
      }
      expect(yield* creditOf(payer)).toBe(credit)
      // A used header cannot pay twice.
      const header = yield* creditHeader(payer, agentId, "flat", body.input)
      expect((yield* creditCall(header, body)).status).toBe(200)
      const replayed = yield* creditCall(header, body)
      expect(replayed.status).toBe(402)
      expect(replayed.body.error?.details).toMatchObject({ reason: "credit_payment_already_used" })
      expect(yield* creditOf(payer)).toBe(credit - FLAT_PRICE)
    }))

  it.scoped("a failed call paid from credit goes back to the credit at once", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const payer = devAccount(7)
      const credit = yield* creditOf(payer)
      const input = { failFirst: `credit-${Date.now()}` }
      const failed = yield* creditCall(yield* creditHeader(payer, agentId, "flat", input), { targetAgentId: agentId, capabilityId: "flat", input })
      expect(failed.status).toBe(502)
      expect(failed.body.error?.details).toMatchObject({ status: "failed", funding: "credit", refund: { status: "credited" } })
      expect(yield* creditOf(payer)).toBe(credit)
    }))

  it.scoped("the payer's spending limits apply to credit calls: over the per-call limit is a 402, the credit untouched", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const payer = devAccount(7)
      const credit = yield* creditOf(payer)
      expect((yield* setLimits(payer, { perCallMax: FLAT_PRICE - 1n })).status).toBe(200)
      const input = { n: 4 }
      const refused = yield* creditCall(yield* creditHeader(payer, agentId, "flat", input), { targetAgentId: agentId, capabilityId: "flat", input })
      expect(refused.status).toBe(402)
      expect(refused.body.error?.details).toMatchObject({ reason: "spending_limit_exceeded" })
      expect(yield* creditOf(payer)).toBe(credit)
    }))

  it.scoped("20 concurrent credit calls against a credit for 10: exactly 10 pass, the credit never goes below zero; ledger = chain", () =>
    Effect.gen(function* () {
      const { agentId } = yield* agentOnce
      const payer = devAccount(8)
      yield* earn(payer, agentId)
      expect(yield* creditOf(payer)).toBe(20_000n)
      const calls = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) =>
        Effect.gen(function* () {
          const input = { n: 100 + i }
          return yield* creditCall(yield* creditHeader(payer, agentId, "flat", input), { targetAgentId: agentId, capabilityId: "flat", input })
        }), { concurrency: 20 })
      const ok = calls.filter((r) => r.status === 200).length
      const short = calls.filter((r) => r.status === 402 && r.body.error?.details?.["reason"] === "insufficient_credit").length
      expect([ok, short]).toEqual([10, 10])
      expect(yield* creditOf(payer)).toBe(0n)
      expect(yield* ledgerBalanced).toBe(0n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
