// x402 v2 end to end with the unmodified official client (@x402/fetch + the exact EVM scheme of @x402/evm) on the devnet:
// registration and execution paid with PAYMENT-SIGNATURE, receipts in PAYMENT-RESPONSE, read-back/retry/rating with
// the X-PAYMENT-USED value, replays and malformed headers refused without charge, payment-identifier charged once.
import { expect, layer } from "@effect/vitest"
import { toClientEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect } from "effect"
import { getAddress } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { Paywall } from "../../services/payments/Paywall.js"
import { fakeAgent } from "../support/agents.js"
import { authorizationUsed, call, devAccount, type Envelope, signPayment, TREASURY, usdcBalance } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const FEE = 100_000n
const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice

// #region docs:x402-v2-client
/** An x402 v2 client paying from `account` on Base Sepolia (chain id 84532, our devnet's), capped at 10 USDC a payment. */
const v2Client = (account: PrivateKeyAccount, usdcAddress: string) =>
  new x402Client()
    .register("eip155:84532", new ExactEvmScheme(toClientEvmSigner(account)))
    // The devnet's USDC is not one of x402's built-in assets: allow it by address, with a cap in atomic units.
    .setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset: usdcAddress, maxAmountPerPayment: "10000000" }] })

/** The same client asking for idempotency: every payment it makes carries `id` in the payment-identifier extension. */
const withPaymentIdentifier = (client: x402Client, id: string) =>
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    const declared = paymentRequired.extensions?.["payment-identifier"]
    if (typeof declared === "object" && declared !== null && "info" in declared && typeof declared.info === "object" && declared.info !== null) {
      Object.assign(declared.info, { id })
    }
  })
// #endregion

/** `fetch` paying with the v2 client, recording the PAYMENT-SIGNATURE headers it sent. */
const payingFetch = (client: x402Client) => {
  const sent: Array<string> = []
  const recording: typeof fetch = (input, init) => {
    const signature = input instanceof Request ? input.headers.get("payment-signature") : null
    if (signature !== null) sent.push(signature)
    return fetch(input, init)
  }
  return { fetch: wrapFetchWithPayment(recording, client), sent }
}

const parse = async (response: Response) => ({ status: response.status, headers: response.headers, body: (await response.json()) as Envelope })

const post = (f: typeof fetch, url: string, json: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => parse(await f(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(json) })))

const decodeHeader = (value: string | null): Record<string, any> => JSON.parse(Buffer.from(value ?? "", "base64").toString("utf8"))

const usdc = () => getAddress(inject("usdcAddress"))

layer(TestApp({ EXECUTION_TIMEOUT_MS: "1500", EXECUTION_RETRY_WINDOW_SECONDS: "600" }), { excludeTestServices: true })("x402 v2", (it) => {
  const paymentsCount = Effect.flatMap(TestEnv, ({ sql }) => Effect.map(sql<{ n: string }>`SELECT count(*)::text AS n FROM payments`, (r) => Number(r[0]?.n)))

  it.effect("a 402 carries the v1 JSON body and the v2 PAYMENT-REQUIRED header with the same exact requirements on eip155:84532", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents`, { method: "POST", json: registration(devAccount(1)) }))
      expect(response.status).toBe(402)
      expect(response.body).toMatchObject({ x402Version: 1, error: { code: "PAYMENT_REQUIRED" }, accepts: [{ network: "base-sepolia", maxAmountRequired: "100000" }] })
      expect(response.headers.get("cache-control")).toBe("no-store")
      expect(decodeHeader(response.headers.get("payment-required"))).toEqual({
        x402Version: 2,
        error: "payment_required",
        resource: { url: `${baseUrl}/api/v1/agents`, description: "Agent registration fee (0.10 USDC)", mimeType: "application/json" },
        accepts: [{
          scheme: "exact",
          network: "eip155:84532",
          asset: usdc(),
          amount: "100000",
          payTo: TREASURY,
          maxTimeoutSeconds: expect.any(Number),
          extra: { name: "USDC", version: "2" }
        }]
      })
    }))

  it.effect("@x402/fetch pays a registration with PAYMENT-SIGNATURE and gets its receipt in PAYMENT-RESPONSE", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(1)
      const payerBefore = yield* Effect.promise(() => usdcBalance(owner.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const usdcAddress = usdc()
      const { response, registered, receipt } = yield* Effect.promise(async () => {
        // #region docs:x402-v2-pay
        const pay = wrapFetchWithPayment(fetch, v2Client(owner, usdcAddress))
        const response = await pay(`${baseUrl}/api/v1/agents`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(registration(owner))
        })
        const registered = await response.json() // { success: true, data: { id, wallet, name, status: "active", registrationTxId } }
        const receipt = decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE") ?? "") // { success, transaction, network, payer }
        // #endregion
        return { response, registered, receipt }
      })
      expect(response.status).toBe(201)
      expect(receipt).toEqual({ success: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/), network: "eip155:84532", payer: owner.address.toLowerCase() })
      expect(registered).toMatchObject({ success: true, data: { status: "active", registrationTxId: receipt.transaction } })
      expect(response.headers.get("x-payment-response")).toBeNull()
      expect(yield* Effect.promise(() => usdcBalance(owner.address))).toBe(payerBefore - FEE)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore + FEE)
    }))

  it.scoped("@x402/fetch pays an execution; X-PAYMENT-USED echoes PAYMENT-SIGNATURE and reads the output back in either header", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(2), agent.url, { tier: "premium" })
      const payer = devAccount(3)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const paying = payingFetch(v2Client(payer, usdc()))
      const response = yield* post(paying.fetch, `${baseUrl}/api/v1/execute`, { targetAgentId: agentId, capabilityId: "echo", input: { text: "v2" } })
      expect(response.status).toBe(200)
      expect(response.body.data).toMatchObject({ status: "completed", output: { echo: { text: "v2" } }, settlement: { status: "settled" } })
      const handle = response.headers.get("x-payment-used")
      expect(handle).toBe(paying.sent[0])
      expect(decodePaymentResponseHeader(response.headers.get("payment-response") ?? "")).toMatchObject({ success: true, network: "eip155:84532" })
      expect(response.headers.get("x-client-id")).toMatch(new RegExp(`^cl_${payer.address.slice(2).toLowerCase()}_`))
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before - PRICE)

      const requestId: string = response.body.data.requestId
      for (const header of ["PAYMENT-SIGNATURE", "X-PAYMENT"]) {
        const owner = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}`, { headers: { [header]: handle ?? "" } }))
        expect(owner.body.data).toMatchObject({ output: { echo: { text: "v2" } }, cost: { total: "0.011000" } })
        expect(owner.headers.get("x-payment-used")).toBe(handle)
      }
      const anonymous = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}`))
      expect(anonymous.body.data.output).toBeUndefined()

      const rated = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/reputation/ratings`, { method: "POST", json: { requestId, rating: 5 }, headers: { "PAYMENT-SIGNATURE": handle ?? "" } }))
      expect(rated.status).toBe(201)
    }))

  it.scoped("a failed execution paid in v2 is retried on its payment with the PAYMENT-SIGNATURE value: charged once", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "fail-times", n: 1, then: "echo" })
      const agentId = yield* registerAgent(devAccount(4), agent.url, { tier: "premium" })
      const payer = devAccount(5)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const paying = payingFetch(v2Client(payer, usdc()))
      const failed = yield* post(paying.fetch, `${baseUrl}/api/v1/execute`, { targetAgentId: agentId, capabilityId: "echo", input: { text: "again" } })
      expect(failed.status).toBe(502)
      const requestId: string = failed.body.error?.details.requestId
      const handle = failed.headers.get("x-payment-used") ?? ""
      expect(handle).toBe(paying.sent[0])
      const retried = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute/${requestId}/retry`, { method: "POST", headers: { "PAYMENT-SIGNATURE": handle } }))
      expect(retried.status).toBe(200)
      expect(retried.body.data).toMatchObject({ requestId, status: "completed", output: { echo: { text: "again" } }, attempts: 2 })
      expect(retried.headers.get("x-payment-used")).toBe(handle)
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
    }))

  it.scoped("the very same PAYMENT-SIGNATURE re-sent with the same body answers the result, charged once; with another body, or re-wrapped as v1, it is refused and charges nothing", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(6), agent.url, { tier: "premium" })
      const payer = devAccount(7)
      const body = { targetAgentId: agentId, capabilityId: "echo", input: { text: "once" } }
      const paying = payingFetch(v2Client(payer, usdc()))
      const first = yield* post(paying.fetch, `${baseUrl}/api/v1/execute`, body)
      expect(first.status).toBe(200)
      const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const rowsBefore = yield* paymentsCount
      const header = paying.sent[0] ?? ""
      // The client lost the answer and sends the identical request again: the result, not a second 402.
      const resent = yield* post(fetch, `${baseUrl}/api/v1/execute`, body, { "PAYMENT-SIGNATURE": header })
      expect(resent.status).toBe(200)
      expect(resent.body.data).toMatchObject({ requestId: first.body.data.requestId, status: "completed", output: { echo: { text: "once" } } })
      expect(resent.headers.get("x-payment-used")).toBe(header)
      expect(decodePaymentResponseHeader(resent.headers.get("payment-response") ?? "")).toMatchObject({ success: true, network: "eip155:84532", payer: payer.address.toLowerCase() })
      expect(agent.calls).toHaveLength(1)
      // The same header with other input is no free call, and tells nothing of the first.
      const replayed = yield* post(fetch, `${baseUrl}/api/v1/execute`, { ...body, input: { text: "other" } }, { "PAYMENT-SIGNATURE": header })
      expect(replayed.status).toBe(402)
      expect(replayed.body.error?.details.reason).toBe("payment_already_used")
      expect(JSON.stringify(replayed.body)).not.toContain(first.body.data.requestId)
      expect(decodeHeader(replayed.headers.get("payment-required"))).toMatchObject({ x402Version: 2, error: "payment_already_used" })
      // The same authorization re-wrapped as a v1 X-PAYMENT is another header text: refused, once-only across versions.
      const rewrapped = { x402Version: 1, scheme: "exact", network: "base-sepolia", payload: decodeHeader(paying.sent[0] ?? null).payload }
      const crossVersion = yield* post(fetch, `${baseUrl}/api/v1/execute`, body, { "X-PAYMENT": Buffer.from(JSON.stringify(rewrapped)).toString("base64") })
      expect(crossVersion.status).toBe(402)
      expect(crossVersion.body.error?.details.reason).toBe("payment_already_used")
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore)
      expect(yield* paymentsCount).toBe(rowsBefore)
      expect(agent.calls).toHaveLength(1)
    }))

  it.scoped("malformed, oversized, too deep, wrong-version or doubled payment headers are answered 402 with the reason and charge nothing", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(8), agent.url, { tier: "premium" })
      const body = { targetAgentId: agentId, capabilityId: "echo", input: { text: "bad" } }
      const b64 = (value: string) => Buffer.from(value).toString("base64")
      const v1 = yield* Effect.promise(() => signPayment({ account: devAccount(9), value: PRICE }))
      const rowsBefore = yield* paymentsCount
      const cases: Array<[Record<string, string>, string]> = [
        [{ "PAYMENT-SIGNATURE": "%%% not base64 %%%" }, "invalid_payload"],
        [{ "PAYMENT-SIGNATURE": b64(JSON.stringify({ x402Version: 2, pad: "x".repeat(9_000) })) }, "invalid_payload"],
        [{ "PAYMENT-SIGNATURE": b64(`{"x402Version":2,"accepted":${"[".repeat(100)}${"]".repeat(100)}}`) }, "invalid_payload"],
        [{ "PAYMENT-SIGNATURE": b64(JSON.stringify({ x402Version: 2, accepted: {}, payload: {} })) }, "invalid_payload"],
        [{ "PAYMENT-SIGNATURE": v1.header }, "invalid_x402_version"],
        [{ "PAYMENT-SIGNATURE": v1.header, "X-PAYMENT": v1.header }, "invalid_payload"]
      ]
      for (const [headers, reason] of cases) {
        const response = yield* post(fetch, `${baseUrl}/api/v1/execute`, body, headers)
        expect(response.status).toBe(402)
        expect(response.body.error?.details.reason).toBe(reason)
        expect(decodeHeader(response.headers.get("payment-required"))).toMatchObject({ x402Version: 2, error: reason })
      }
      expect(yield* paymentsCount).toBe(rowsBefore)
      expect(yield* Effect.promise(() => authorizationUsed(devAccount(9).address, v1.nonce))).toBe(false)
    }))

  it.scoped("a repeat with the same payment-identifier is the same purchase: one execution, charged once; other input is a conflict", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(9), agent.url, { tier: "premium" })
      const payer = devAccount(6)
      const challenge = yield* post(fetch, `${baseUrl}/api/v1/execute`, { targetAgentId: agentId, capabilityId: "echo", input: { text: "id" } })
      expect(decodeHeader(challenge.headers.get("payment-required")).extensions).toMatchObject({ "payment-identifier": { info: { required: false } } })
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const paying = payingFetch(withPaymentIdentifier(v2Client(payer, usdc()), "pay_0123456789abcdef0123"))
      const body = { targetAgentId: agentId, capabilityId: "echo", input: { text: "id" } }
      const first = yield* post(paying.fetch, `${baseUrl}/api/v1/execute`, body)
      const second = yield* post(paying.fetch, `${baseUrl}/api/v1/execute`, body)
      expect(first.status).toBe(200)
      expect(second.status).toBe(200)
      expect(second.body.data).toMatchObject({ requestId: first.body.data.requestId, status: "completed", output: { echo: { text: "id" } } })
      expect(paying.sent).toHaveLength(2)
      expect(decodeHeader(paying.sent[1] ?? null).extensions["payment-identifier"].info.id).toBe("pay_0123456789abcdef0123")
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
      const secondNonce = decodeHeader(paying.sent[1] ?? null).payload.authorization.nonce
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, secondNonce))).toBe(false)
      expect(agent.calls).toHaveLength(1)

      const conflict = yield* post(paying.fetch, `${baseUrl}/api/v1/execute`, { ...body, input: { text: "other" } })
      expect(conflict.status).toBe(409)
      expect(conflict.body.error?.code).toBe("IDEMPOTENCY_CONFLICT")
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
      expect((yield* balanceOf(agentId)).body.data.executionCount).toBe(1)

      // The identical PAYMENT-SIGNATURE (its payment-identifier is the key) re-sent: the result again, nothing charged.
      const resent = yield* post(fetch, `${baseUrl}/api/v1/execute`, body, { "PAYMENT-SIGNATURE": paying.sent[0] ?? "" })
      expect(resent.status).toBe(200)
      expect(resent.body.data).toMatchObject({ requestId: first.body.data.requestId, status: "completed", output: { echo: { text: "id" } } })
      // The same header under another idempotency key is another purchase: refused, not answered.
      const otherKey = yield* post(fetch, `${baseUrl}/api/v1/execute`, { ...body, idempotencyKey: "another-key" }, { "PAYMENT-SIGNATURE": paying.sent[0] ?? "" })
      expect(otherKey.status).toBe(402)
      expect(otherKey.body.error?.details.reason).toBe("payment_already_used")
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
      expect(agent.calls).toHaveLength(1)
    }))

  it.effect("a v2 payment handed over already decoded (x402 MCP transport) is verified like its header and charges nothing by itself", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const paywall = yield* Paywall
      const payer = devAccount(4)
      const quote = { amount: PRICE, resource: `${baseUrl}/mcp`, description: "an MCP tool" }
      const missing = yield* Effect.flip(paywall.chargeV2Payload(quote, undefined))
      expect(missing.details["reason"]).toBe("payment_required")
      const challenge = paywall.challengeV2(missing)
      expect(challenge).toMatchObject({ x402Version: 2, resource: { url: `${baseUrl}/mcp` }, accepts: [{ network: "eip155:84532", amount: "11000" }] })
      // What an MCP client holds: the PaymentRequired object of the tool's error result, as x402 types it.
      const required = decodePaymentRequiredHeader(encodeHeaderJson(challenge))
      const payload = yield* Effect.promise(() => v2Client(payer, usdc()).createPaymentPayload(required))
      const charged = yield* paywall.chargeV2Payload(quote, payload)
      expect(charged.presentation).toMatchObject({ version: 2, network: "eip155:84532", handle: Buffer.from(JSON.stringify(payload)).toString("base64") })
      expect(charged.payment).toMatchObject({ payer: payer.address.toLowerCase(), amount: PRICE })
      expect(paywall.receipt(charged.presentation, { txHash: "0xabc", payer: charged.payment.payer })).toEqual({
        success: true,
        transaction: "0xabc",
        network: "eip155:84532",
        payer: payer.address.toLowerCase()
      })
      const nonce = decodeHeader(charged.presentation.handle).payload.authorization.nonce
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
