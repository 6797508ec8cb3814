// The payer's receipt end to end: every paid call (x402 v1 and v2 over HTTP, v2 over MCP) carries, beside its
// settlement, a receipt signed with the key published at /api/v1/platform/signing-key; it matches the ledger and the
// chain, reads back the same with the payment header, and a failed call has none.
import { expect, layer } from "@effect/vitest"
import { x402Client } from "@x402/core/client"
import { isPaymentRequiredV2 } from "@x402/core/schemas"
import { toClientEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { decodePaymentResponseHeader, wrapFetchWithPayment } from "@x402/fetch"
import { Effect } from "effect"
import { createHash, createPublicKey, verify } from "node:crypto"
import { getAddress } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { decodeXPaymentResponse } from "x402-fetch"
import { contentSha256, type ExecutionReceipt, verifyReceipt } from "../../sdk/src/receipts.js"
import { fetchMarketplaceKey } from "../../sdk/src/requestSignature.js"
import { marketplace } from "../../sdk/src/client.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, usdcBalance } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { mcpSession } from "../support/mcp.js"
import { execute, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice

// #region docs:receipt-check
/** JSON with object keys sorted at every level and no whitespace: what a receipt's signature and hashes cover. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(value) ?? "null"

/** True when the marketplace's key (the PEM of GET /api/v1/platform/signing-key) signed the receipt, unchanged. */
const receiptIsGenuine = (receipt: Record<string, unknown>, publicKeyPem: string): boolean => {
  const { signature, ...fields } = receipt
  return typeof signature === "string" &&
    verify(null, Buffer.from(canonical(fields), "utf8"), createPublicKey(publicKeyPem), Buffer.from(signature, "base64"))
}

/** Compare with the receipt's `requestSha256` (the input you sent) and `responseSha256` (the output you got). */
const contentHash = (value: unknown): string => createHash("sha256").update(canonical(value), "utf8").digest("hex")
// #endregion

const usdc = () => getAddress(inject("usdcAddress"))
const balance = (account: PrivateKeyAccount) => Effect.promise(() => usdcBalance(account.address))

const v2Client = (account: PrivateKeyAccount) =>
  new x402Client()
    .register("eip155:84532", new ExactEvmScheme(toClientEvmSigner(account)))
    .setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset: usdc(), maxAmountPerPayment: "1000000" }] })

const publishedKey = Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => fetchMarketplaceKey(baseUrl)))

/** What the ledger and the payments table say this execution's payer paid and got back. */
const booked = (requestId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ held: string; refunded: string; authorized: string }>`
      SELECT
        (SELECT coalesce(sum(e.amount), 0)::text FROM ledger_transfers t JOIN ledger_entries e ON e.transfer_id = t.id
          WHERE t.subject_id = ${requestId} AND t.kind = 'escrow_hold' AND e.amount > 0) AS held,
        (SELECT count(*)::text FROM refunds WHERE execution_id = ${requestId}) AS refunded,
        (SELECT p.amount::text FROM executions x JOIN payments p ON p.id = x.payment_id WHERE x.id = ${requestId}) AS authorized`.pipe(
      Effect.map((rows) => rows[0]!)
    ))

/** The checks every paid call's receipt passes: signature, fields, ledger, chain, read-back. */
const checkReceipt = (receipt: ExecutionReceipt | undefined, expected: {
  readonly requestId: string
  readonly payer: PrivateKeyAccount
  readonly agentId: string
  readonly input: unknown
  readonly output: unknown
  readonly txHash: string
  readonly paymentUsed: string
  readonly payerBefore: bigint
}) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const key = yield* publishedKey
    expect(receipt).toBeDefined()
    const r = receipt!
    expect(verifyReceipt(r, key)).toBe(true)
    // The same with node:crypto alone (the snippet in docs/clients.md).
    const published = yield* Effect.promise(() => call(`${baseUrl}/api/v1/platform/signing-key`))
    expect(receiptIsGenuine({ ...r }, published.body.data.publicKeyPem)).toBe(true)
    expect(receiptIsGenuine({ ...r, payer: devAccount(9).address.toLowerCase() }, published.body.data.publicKeyPem)).toBe(false)
    expect([contentHash(expected.input), contentHash(expected.output)]).toEqual([r.requestSha256, r.responseSha256])
    expect(r).toMatchObject({
      receiptVersion: 1,
      requestId: expected.requestId,
      payer: expected.payer.address.toLowerCase(),
      agentId: expected.agentId,
      capabilityId: "echo",
      network: "eip155:84532",
      transaction: expected.txHash,
      unit: "call",
      unitsUsed: "1",
      unitPrice: "10000",
      platformFee: "1000",
      authorized: PRICE.toString(),
      charged: PRICE.toString(),
      returned: "0",
      requestSha256: contentSha256(expected.input),
      responseSha256: contentSha256(expected.output),
      keyId: key.keyId
    })
    // What the receipt says is what moved: on chain, and in the ledger's escrow.
    expect(yield* balance(expected.payer)).toBe(expected.payerBefore - BigInt(r.charged))
    expect(yield* booked(expected.requestId)).toEqual({ held: r.charged, refunded: "0", authorized: r.authorized })
    // Readable later by the payer, the same bytes; not without the payment header.
    const again = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${expected.requestId}/receipt`, { headers: { "X-PAYMENT": expected.paymentUsed } }))
    expect(again.status).toBe(200)
    expect(again.body.data).toEqual(r)
    const anonymous = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${expected.requestId}/receipt`))
    expect(anonymous.status).toBe(403)
    expect(anonymous.body.error?.code).toBe("RECEIPT_NOT_AUTHORIZED")
    // Any changed field fails.
    expect(verifyReceipt({ ...r, charged: "1", returned: (BigInt(r.authorized) - 1n).toString() }, key)).toBe(false)
  })

layer(TestApp({ EXECUTION_TIMEOUT_MS: "5000", EXECUTION_RETRY_WINDOW_SECONDS: "600" }), { excludeTestServices: true, timeout: 120_000 })("receipts", (it) => {
  it.scoped("an x402 v1 call: X-PAYMENT-RESPONSE carries a receipt that verifies with the published key and matches the ledger and the chain", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payer = devAccount(2)
      const input = { text: "receipt v1", more: { z: 1, a: [true, null] } }
      const payerBefore = yield* balance(payer)
      const response = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input })
      expect(response.status).toBe(200)
      const settlement = decodeXPaymentResponse(response.headers.get("x-payment-response") ?? "") as { transaction: string; network: string; extensions?: { receipt?: ExecutionReceipt } }
      const { baseUrl } = yield* TestEnv
      const output: unknown = response.body.data.output
      const genuine = yield* Effect.promise(async () => {
        // #region docs:receipt-read
        const published = await fetch(`${baseUrl}/api/v1/platform/signing-key`)
        const { data: key } = (await published.json()) as { data: { keyId: string; publicKeyPem: string } }
        const header = response.headers.get("X-PAYMENT-RESPONSE") ?? response.headers.get("PAYMENT-RESPONSE") ?? ""
        const { extensions } = JSON.parse(Buffer.from(header, "base64").toString("utf8"))
        const receipt = extensions.receipt // { requestId, payer, charged, returned, requestSha256, …, keyId, signature }
        const ok = receiptIsGenuine(receipt, key.publicKeyPem) && receipt.keyId === key.keyId &&
          receipt.requestSha256 === contentHash(input) && receipt.responseSha256 === contentHash(output)
        // #endregion
        return ok
      })
      expect(genuine).toBe(true)
      expect(settlement).toMatchObject({ success: true, network: "base-sepolia", transaction: response.body.data.settlement.txHash })
      yield* checkReceipt(settlement.extensions?.receipt, {
        requestId: response.body.data.requestId,
        payer,
        agentId,
        input,
        output: response.body.data.output,
        txHash: response.body.data.settlement.txHash,
        paymentUsed: response.headers.get("x-payment-used") ?? "",
        payerBefore
      })
    }))

  it.scoped("an x402 v2 call (@x402/fetch): PAYMENT-RESPONSE carries the receipt under extensions, the official decoder reads it, it verifies", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), agent.url, { tier: "premium" })
      const payer = devAccount(4)
      const input = { text: "receipt v2" }
      const payerBefore = yield* balance(payer)
      const paying = wrapFetchWithPayment(fetch, v2Client(payer))
      const response = yield* Effect.promise(() =>
        paying(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input }) }))
      const body = (yield* Effect.promise(() => response.json())) as { data: { requestId: string; output: unknown; settlement: { txHash: string } } }
      expect(response.status).toBe(200)
      const settlement = decodePaymentResponseHeader(response.headers.get("payment-response") ?? "")
      expect(settlement).toMatchObject({ success: true, network: "eip155:84532", transaction: body.data.settlement.txHash })
      yield* checkReceipt(settlement.extensions?.["receipt"] as ExecutionReceipt | undefined, {
        requestId: body.data.requestId,
        payer,
        agentId,
        input,
        output: body.data.output,
        txHash: body.data.settlement.txHash,
        paymentUsed: response.headers.get("x-payment-used") ?? "",
        payerBefore
      })
    }))

  it.scoped("an MCP execute: the result's _meta[\"x402/payment-response\"] carries the receipt; it verifies and matches", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(5), agent.url, { tier: "premium" })
      const payer = devAccount(6)
      const input = { text: "receipt over mcp" }
      const payerBefore = yield* balance(payer)
      const { client, transport } = yield* mcpSession("receipts-test")
      expect(transport).toBeDefined()
      const args = { targetAgentId: agentId, capabilityId: "echo", input }
      const result = yield* Effect.promise(async () => {
        const first = await client.callTool({ name: "execute", arguments: args })
        if (!first.isError || !isPaymentRequiredV2(first.structuredContent)) throw new Error("expected a payment challenge")
        const payment = await v2Client(payer).createPaymentPayload(JSON.parse(JSON.stringify(first.structuredContent)))
        return client.callTool({ name: "execute", arguments: args, _meta: { "x402/payment": payment } })
      })
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
      const done = (result.structuredContent ?? {}) as { requestId: string; output: unknown; paymentUsed: string; settlement: { txHash: string } }
      const settlement = result._meta?.["x402/payment-response"] as { transaction: string; extensions?: { receipt?: ExecutionReceipt } }
      expect(settlement).toMatchObject({ success: true, network: "eip155:84532", transaction: done.settlement.txHash })
      yield* checkReceipt(settlement.extensions?.receipt, {
        requestId: done.requestId,
        payer,
        agentId,
        input,
        output: done.output,
        txHash: done.settlement.txHash,
        paymentUsed: done.paymentUsed,
        payerBefore
      })
    }))

  it.scoped("the SDK: market.execute returns the receipt (v1 and v2 payers), verifyReceipt accepts it, market.receipt reads the same later", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(9), agent.url, { tier: "premium" })
      const key = yield* publishedKey
      for (const x402 of ["v1", "v2"] as const) {
        const market = marketplace({ baseUrl, wallet: devAccount(2), x402, maxPayment: "1.00" })
        const input = { text: `sdk ${x402}` }
        const result = yield* Effect.promise(() => market.execute(agentId, "echo", input))
        expect(result.receipt, x402).toBeDefined()
        expect(verifyReceipt(result.receipt!, key), x402).toBe(true)
        expect(result.receipt).toMatchObject({ requestId: result.requestId, charged: PRICE.toString(), requestSha256: contentSha256(input), responseSha256: contentSha256(result.output) })
        expect(yield* Effect.promise(() => market.receipt(result.requestId))).toEqual(result.receipt)
      }
    }))

  it.scoped("a failed call carries its settlement but no receipt, and its receipt endpoint answers RECEIPT_NOT_FOUND; unknown ids 404", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "boom" } })
      const agentId = yield* registerAgent(devAccount(7), agent.url, { tier: "premium" })
      const response = yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text: "fails" } })
      expect(response.status).toBe(502)
      const header = response.headers.get("x-payment-response")
      if (header !== null) expect(decodeXPaymentResponse(header)).not.toHaveProperty("extensions")
      const requestId: string = response.body.error?.details?.requestId
      const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}/receipt`, { headers: { "X-PAYMENT": response.headers.get("x-payment-used") ?? "" } }))
      expect(read.status).toBe(404)
      expect(read.body.error).toMatchObject({ code: "RECEIPT_NOT_FOUND", details: { status: "failed" } })
      const unknown = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/req_doesnotexist00/receipt`))
      expect(unknown.status).toBe(404)
      expect(unknown.body.error?.code).toBe("EXECUTION_NOT_FOUND")
    }))
})
