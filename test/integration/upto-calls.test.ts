// x402 `upto` end to end with the unmodified official client (@x402/fetch + @x402/evm's upto client scheme) on the
// devnet: a metered call authorizes its maximum through Permit2 and settles exactly what it used, in one transaction
// from our treasury writer; payer, treasury and ledger agree to the micro-USDC. A failed call settles nothing; a
// re-sent header answers its own call; authorizations naming another receiver or facilitator, below the maximum, too
// short or from a payer without Permit2 allowance are refused before the agent runs, with nothing charged and no gas
// spent; a payer who moves the money during the call gets a 402 without the output, and nothing moves.
import { afterAll, expect, layer } from "@effect/vitest"
import type { PaymentRequirements } from "@x402/core/types"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { isPaymentRequiredV2 } from "@x402/core/schemas"
import { decodePaymentResponseHeader } from "@x402/fetch"
import { Effect } from "effect"
import { getAddress, type Hex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { call, devAccount, publicClient, strangerAccount, TREASURY, usdcBalance, walletFor } from "../support/clients.js"
import { capability } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { startMeteredAgent } from "../support/meteredAgent.js"
import { echoCapability, ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { mcpSession } from "../support/mcp.js"
import { approvePermit2, uptoClient, uptoHeader, uptoPayer } from "../support/uptoClient.js"

const tokens = capability({
  id: "tokens", name: "Tokens", description: "per-token", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "per-token", basePrice: "0.002", currency: "USDC", maxTokens: 10_000 }
})
const MAXIMUM = 21_000n // 0.001 fee + 10,000 tokens at 0.002 per 1,000
const charge = (units: bigint) => 1_000n + (units * 2_000n + 999n) / 1_000n

const usdc = (): Hex => getAddress(inject("usdcAddress"))
const balance = (a: `0x${string}`) => Effect.promise(() => usdcBalance(a))
/** Transactions the treasury writer (dev account 0) has sent: a refusal must not move it. */
const treasuryNonce = Effect.promise(() => publicClient().getTransactionCount({ address: TREASURY }))
const mined = (hash: Hex) => Effect.promise(() => publicClient().waitForTransactionReceipt({ hash }))

const post = (f: typeof fetch, url: string, json: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await f(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(json) })
    const text = await response.text()
    return { status: response.status, headers: response.headers, body: JSON.parse(text) as Record<string, any> }
  })

layer(TestApp({ EXECUTION_TIMEOUT_MS: "10000", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", RATE_LIMIT_AGENT_PER_WINDOW: "1000" }), { excludeTestServices: true, timeout: 120_000 })("x402 upto", (it) => {
  let shared: { readonly agent: Awaited<ReturnType<typeof startMeteredAgent>>; readonly agentId: string; readonly url: string } | undefined
  afterAll(() => shared?.agent.close())
  const setup = Effect.gen(function* () {
    if (shared !== undefined) return shared
    const { baseUrl } = yield* TestEnv
    const agent = yield* Effect.promise(startMeteredAgent)
    const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium", capabilities: [tokens, echoCapability()] })
    yield* mined(yield* Effect.promise(() => approvePermit2(devAccount(8), usdc())))
    shared = { agent, agentId, url: `${baseUrl}/api/v1/execute` }
    return shared
  })
  /** The 402 of an unpaid call of `capabilityId`: its v2 offers. */
  const offers = (capabilityId: string) =>
    Effect.gen(function* () {
      const { agentId, url } = yield* setup
      const unpaid = yield* post(fetch, url, { targetAgentId: agentId, capabilityId, input: { text: "hi", units: "1" } })
      expect(unpaid.status).toBe(402)
      const accepts: ReadonlyArray<PaymentRequirements> = decodePaymentRequiredHeader(unpaid.headers.get("payment-required") ?? "").accepts
      return accepts
    })
  const uptoOffer = Effect.map(offers("tokens"), (accepts) => accepts.find((a) => a.scheme === "upto") as PaymentRequirements)

  it.effect("a metered call settles exactly what it used in one transaction; payer, treasury and ledger agree", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const { agentId, url } = yield* setup
      const payer = devAccount(8)
      const [payerBefore, treasuryBefore] = [yield* balance(payer.address), yield* balance(TREASURY)]
      const paid = yield* Effect.promise(async () => {
        // #region docs:upto-pay
        const payWithUpto = uptoClient(payer, { rpcUrl: inject("rpcUrl"), usdc: usdc() })
        const answer = await payWithUpto(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ targetAgentId: agentId, capabilityId: "tokens", input: { units: "3000" } })
        })
        const settled = decodePaymentResponseHeader(answer.headers.get("PAYMENT-RESPONSE") ?? "") // { success, transaction, amount: what the call used }
        // #endregion
        return { status: answer.status, body: (await answer.json()) as Record<string, any>, settled }
      })
      expect(paid.status, JSON.stringify(paid.body)).toBe(200)
      expect(paid.body["data"]).toMatchObject({ status: "completed", output: { ok: true }, settlement: { status: "settled" }, metering: { authorized: "0.021000", charged: "0.007000" } })
      const response = paid.settled
      expect(response).toMatchObject({ success: true, network: "eip155:84532", amount: charge(3_000n).toString() })
      expect(response.extensions?.["receipt"]).toMatchObject({ scheme: "upto", authorized: MAXIMUM.toString(), charged: charge(3_000n).toString() })
      // One settle, from our writer, moving the charge: the payer paid it, the treasury got it.
      const receipt = yield* Effect.promise(() => publicClient().getTransactionReceipt({ hash: response.transaction as Hex }))
      expect(getAddress(receipt.from)).toBe(getAddress(TREASURY))
      expect(yield* balance(payer.address)).toBe(payerBefore - charge(3_000n))
      expect(yield* balance(TREASURY)).toBe(treasuryBefore + charge(3_000n))
      const [row] = yield* sql<{ status: string; uptoCharged: string; amount: string }>`SELECT status, upto_charged::text, amount::text FROM payments WHERE purpose = 'upto' AND subject_id = ${String(paid.body["data"]["requestId"])}`
      expect(row).toEqual({ status: "settled", uptoCharged: charge(3_000n).toString(), amount: MAXIMUM.toString() })
      expect(yield* ledgerMatchesChain).toBe(0n)
      const [receivable] = yield* sql<{ balance: string }>`SELECT COALESCE(SUM(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = 'settlement_receivable'`
      expect(receivable?.balance).toBe("0")
    }))

  it.effect("a failed call charges nothing and sends no transaction; its unused authorization cannot pay another call", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const { agentId, url } = yield* setup
      const payer = devAccount(8)
      const [payerBefore, nonceBefore] = [yield* balance(payer.address), yield* treasuryNonce]
      const sent: Array<string> = []
      const recording: typeof fetch = (input, init) => {
        const header = input instanceof Request ? input.headers.get("payment-signature") : null
        if (header !== null) sent.push(header)
        return fetch(input, init)
      }
      const failed = yield* post(uptoClient(payer, { rpcUrl: inject("rpcUrl"), usdc: usdc(), fetch: recording }), url, { targetAgentId: agentId, capabilityId: "tokens", input: { units: "5", failFirst: "upto-fail" } })
      expect(failed.status).toBe(502)
      expect(failed.body).toMatchObject({ error: { code: "EXECUTION_FAILED", message: expect.stringContaining("nothing was charged") } })
      expect(failed.headers.get("payment-response")).toBeNull()
      expect(yield* balance(payer.address)).toBe(payerBefore)
      expect(yield* treasuryNonce).toBe(nonceBefore)
      const [row] = yield* sql<{ status: string; uptoCharged: string | null; failureReason: string }>`SELECT status, upto_charged::text, failure_reason FROM payments WHERE purpose = 'upto' AND subject_id = ${String(failed.body["error"]["details"]["requestId"])}`
      expect(row).toMatchObject({ status: "failed", uptoCharged: null, failureReason: expect.stringContaining("unused") })
      const retried = yield* Effect.promise(() => call(`${url}/${String(failed.body["error"]["details"]["requestId"])}/retry`, { method: "POST", headers: { "payment-signature": sent[0]! } }))
      expect(retried.body).toMatchObject({ error: { code: "EXECUTION_NOT_RETRYABLE" } })
      // Its authorization, unused on chain, cannot pay another call: the same payload in another header's text (a new
      // hash) is refused by the Permit2 nonce our payment row holds, before the agent is called.
      const payload: unknown = JSON.parse(Buffer.from(sent[0]!, "base64").toString("utf8"))
      const reencoded = Buffer.from(JSON.stringify(payload, null, 1), "utf8").toString("base64")
      const callsBefore = (yield* setup).agent.calls.length
      const replayed = yield* post(fetch, url, { targetAgentId: agentId, capabilityId: "tokens", input: { units: "6" } }, { "payment-signature": reencoded })
      expect(replayed.status).toBe(402)
      expect(replayed.body).toMatchObject({ error: { details: { reason: "payment_already_used" } } })
      expect((yield* setup).agent.calls.length).toBe(callsBefore)
      expect(yield* balance(payer.address)).toBe(payerBefore)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.effect("a re-sent PAYMENT-SIGNATURE answers its own call, charged once; on another request it is refused", () =>
    Effect.gen(function* () {
      const { agentId, url } = yield* setup
      const payer = devAccount(8)
      const sent: Array<string> = []
      const recording: typeof fetch = (input, init) => {
        const header = input instanceof Request ? input.headers.get("payment-signature") : null
        if (header !== null) sent.push(header)
        return fetch(input, init)
      }
      const body = { targetAgentId: agentId, capabilityId: "tokens", input: { units: "1000" } }
      const first = yield* post(uptoClient(payer, { rpcUrl: inject("rpcUrl"), usdc: usdc(), fetch: recording }), url, body)
      expect(first.status).toBe(200)
      const afterFirst = yield* balance(payer.address)
      const again = yield* post(fetch, url, body, { "payment-signature": sent[0]! })
      expect(again.status).toBe(200)
      expect(again.body["data"]).toMatchObject({ requestId: first.body["data"]["requestId"], output: { ok: true } })
      expect(decodePaymentResponseHeader(again.headers.get("payment-response") ?? "")).toMatchObject({ network: "eip155:84532", amount: charge(1_000n).toString() })
      const other = yield* post(fetch, url, { ...body, input: { units: "2" } }, { "payment-signature": sent[0]! })
      expect(other.status).toBe(402)
      expect(other.body).toMatchObject({ error: { details: { reason: "payment_already_used" } } })
      expect(yield* balance(payer.address)).toBe(afterFirst)
    }))

  it.effect("authorizations naming another receiver or facilitator, below the maximum, too short, or without Permit2 allowance are refused: nothing charged, no gas", () =>
    Effect.gen(function* () {
      const { agentId, url } = yield* setup
      const offer = yield* uptoOffer
      expect(offer).toMatchObject({ amount: MAXIMUM.toString(), payTo: getAddress(TREASURY), extra: { facilitatorAddress: getAddress(TREASURY), name: expect.any(String), version: expect.any(String) } })
      // A payer with USDC and gas but no Permit2 approval.
      const stranger = strangerAccount()
      yield* mined(yield* Effect.promise(() => walletFor(devAccount(9)).writeContract({ address: usdc(), abi: usdcAbi, functionName: "transfer", args: [stranger.address, 100_000n] })))
      const cases: ReadonlyArray<readonly [string, PrivateKeyAccount, PaymentRequirements]> = [
        ["invalid_permit2_recipient_mismatch", devAccount(8), { ...offer, payTo: devAccount(3).address }],
        ["upto_facilitator_mismatch", devAccount(8), { ...offer, extra: { ...offer.extra, facilitatorAddress: devAccount(3).address } }],
        ["permit2_amount_mismatch", devAccount(8), { ...offer, amount: (MAXIMUM - 1n).toString() }],
        ["permit2_deadline_expired", devAccount(8), { ...offer, maxTimeoutSeconds: 5 }],
        ["permit2_allowance_required", stranger, offer]
      ]
      const nonceBefore = yield* treasuryNonce
      const callsBefore = (yield* setup).agent.calls.length
      for (const [reason, payer, requirements] of cases) {
        const before = yield* balance(payer.address)
        const header = yield* Effect.promise(() => uptoHeader(payer, requirements))
        const refused = yield* post(fetch, url, { targetAgentId: agentId, capabilityId: "tokens", input: { units: "1" } }, { "payment-signature": header })
        expect(refused.status, reason).toBe(402)
        expect(refused.body, reason).toMatchObject({ error: { code: "PAYMENT_REQUIRED", details: { reason } } })
        expect(yield* balance(payer.address)).toBe(before)
      }
      expect(yield* treasuryNonce).toBe(nonceBefore)
      expect((yield* setup).agent.calls.length).toBe(callsBefore)
    }))

  it.effect("a non-metered capability's 402 has no upto offer; a metered one's has it beside exact", () =>
    Effect.gen(function* () {
      expect((yield* offers("echo")).map((a) => a.scheme)).not.toContain("upto")
      expect((yield* offers("tokens")).map((a) => a.scheme)).toEqual(expect.arrayContaining(["exact", "upto"]))
    }))

  it.effect("a payer who revokes Permit2 during the call gets a 402 without the output: nothing settles, the agent earns nothing", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const { agent, agentId, url } = yield* setup
      const payer = devAccount(6)
      yield* mined(yield* Effect.promise(() => approvePermit2(payer, usdc())))
      const [payerBefore, nonceBefore] = [yield* balance(payer.address), yield* treasuryNonce]
      const callsBefore = agent.calls.length
      const paying = yield* Effect.fork(post(uptoClient(payer, { rpcUrl: inject("rpcUrl"), usdc: usdc() }), url, { targetAgentId: agentId, capabilityId: "tokens", input: { units: "10", delayMs: 1_500 } }))
      // Once the agent has the call (verification passed), the payer takes its allowance back.
      while (agent.calls.length === callsBefore) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      yield* mined(yield* Effect.promise(() => approvePermit2(payer, usdc(), 0n)))
      const answered = yield* paying.await.pipe(Effect.flatten)
      expect(answered.status).toBe(402)
      expect(answered.body).toMatchObject({ error: { code: "PAYMENT_REQUIRED", details: { reason: "settlement_failed" } } })
      expect(JSON.stringify(answered.body)).not.toContain("\"ok\":true")
      expect(yield* balance(payer.address)).toBe(payerBefore)
      expect(yield* treasuryNonce).toBe(nonceBefore)
      const requestId = String(answered.body["error"]["details"]["requestId"])
      const [execution] = yield* sql<{ status: string; escrowStatus: string }>`SELECT e.status, w.status AS escrow_status FROM executions e JOIN escrows w ON w.execution_id = e.id WHERE e.id = ${requestId}`
      expect(execution).toEqual({ status: "completed", escrowStatus: "void" })
      const status = yield* Effect.promise(() => call(`${url}/${requestId}`))
      expect(status.body).toMatchObject({ data: { status: "completed", settlement: { status: "settlement_failed" } } })
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("over MCP: a metered execute's 402 offers upto, the official client's authorization in _meta pays exactly what was used", () =>
    Effect.gen(function* () {
      const { agentId } = yield* setup
      const payer = devAccount(8)
      const before = yield* balance(payer.address)
      const { client } = yield* mcpSession("upto payer")
      const args = { targetAgentId: agentId, capabilityId: "tokens", input: { units: "500" } }
      const unpaid = yield* Effect.promise(() => client.callTool({ name: "execute", arguments: args }))
      expect(unpaid.isError).toBe(true)
      if (!isPaymentRequiredV2(unpaid.structuredContent)) throw new Error("no PaymentRequired over MCP")
      expect(unpaid.structuredContent.accepts.map((a) => a.scheme)).toContain("upto")
      const payment = yield* Effect.promise(() => uptoPayer(payer, { rpcUrl: inject("rpcUrl"), usdc: usdc() }).createPaymentPayload(JSON.parse(JSON.stringify(unpaid.structuredContent))))
      expect(payment.accepted.scheme).toBe("upto")
      const paid = yield* Effect.promise(() => client.callTool({ name: "execute", arguments: args, _meta: { "x402/payment": payment } }))
      expect(paid.isError ?? false, JSON.stringify(paid.content)).toBe(false)
      expect(paid._meta?.["x402/payment-response"]).toMatchObject({ success: true, amount: charge(500n).toString() })
      expect(yield* balance(payer.address)).toBe(before - charge(500n))
    }))
})
