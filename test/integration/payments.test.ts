import { expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { getAddress, type Hex, parseSignature } from "viem"
import { PaymentVerifier } from "../../layers/PaymentVerifier.js"
import { Payments } from "../../services/payments/Payments.js"
import {
  authorizationUsed,
  call,
  devAccount,
  signPayment,
  strangerAccount,
  TREASURY,
  usdcBalance,
  walletFor
} from "../support/clients.js"
import { registration, withWalletProof } from "../support/fixtures.js"
import { ledgerMatchesChain } from "../support/scenario.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { inject } from "vitest"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"

const FEE = 100_000n

layer(TestApp(), { excludeTestServices: true })("x402 payments", (it) => {
  const register = (body: unknown, header: string) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) =>
      Effect.promise(() => call(`${baseUrl}/api/v1/agents`, { method: "POST", json: body, headers: { "X-PAYMENT": header } })))

  /** Sends a refused payment and checks that nothing moved: payer balance, authorization, payments table, agent. */
  const refusedWithoutCharge = (options: Parameters<typeof signPayment>[0], reason: string, ownerIndex: number) =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const owner = devAccount(ownerIndex)
      const { header, nonce } = yield* Effect.promise(() => signPayment(options))
      const payerBefore = yield* Effect.promise(() => usdcBalance(options.account.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const response = yield* register(registration(owner), header)
      expect(response.status).toBe(402)
      expect(response.body.error?.code).toBe("PAYMENT_REQUIRED")
      expect(response.body.error?.details.reason).toBe(reason)
      expect((response.body as unknown as { accepts: Array<unknown> }).accepts).toHaveLength(1)
      expect(yield* Effect.promise(() => usdcBalance(options.account.address))).toBe(payerBefore)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore)
      expect(yield* Effect.promise(() => authorizationUsed(options.account.address, nonce))).toBe(false)
      const rows = yield* sql`SELECT 1 FROM payments WHERE nonce = ${nonce}`
      expect(rows).toHaveLength(0)
      const agents = yield* sql`SELECT 1 FROM agents WHERE wallet = ${owner.address.toLowerCase()}`
      expect(agents).toHaveLength(0)
    })

  it.effect("without X-PAYMENT the answer is a 402 that is both an x402 v1 challenge and our envelope", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents`, { method: "POST", json: registration(devAccount(1)) }))
      expect(response.status).toBe(402)
      expect(response.body).toMatchObject({
        x402Version: 1,
        success: false,
        error: { code: "PAYMENT_REQUIRED", details: { price: "0.100000", wallet: TREASURY, network: "base-sepolia" } },
        accepts: [{
          scheme: "exact",
          network: "base-sepolia",
          maxAmountRequired: "100000",
          resource: `${baseUrl}/api/v1/agents`,
          mimeType: "application/json",
          payTo: TREASURY,
          asset: getAddress(inject("usdcAddress")),
          extra: { name: "USDC", version: "2" }
        }]
      })
    }))

  it.effect("an underpaid payment is refused and charges nothing", () =>
    refusedWithoutCharge({ account: devAccount(2), value: 99_999n }, "invalid_exact_evm_payload_authorization_value", 1))

  it.effect("an overpaid payment is refused too (exact scheme)", () =>
    refusedWithoutCharge({ account: devAccount(2), value: 100_001n }, "invalid_exact_evm_payload_authorization_value", 1))

  it.effect("an expired payment is refused and charges nothing", () =>
    refusedWithoutCharge(
      { account: devAccount(2), value: FEE, validBefore: BigInt(Math.floor(Date.now() / 1000) - 1) },
      "invalid_exact_evm_payload_authorization_valid_before",
      1
    ))

  it.effect("a payment that expires before it could settle is refused", () =>
    refusedWithoutCharge(
      { account: devAccount(2), value: FEE, validBefore: BigInt(Math.floor(Date.now() / 1000) + 2) },
      "invalid_exact_evm_payload_authorization_valid_before",
      1
    ))

  it.effect("a payment not valid yet is refused", () =>
    refusedWithoutCharge(
      { account: devAccount(2), value: FEE, validAfter: BigInt(Math.floor(Date.now() / 1000) + 120) },
      "invalid_exact_evm_payload_authorization_valid_after",
      1
    ))

  it.effect("a payment signed by another key is refused and charges nothing", () =>
    refusedWithoutCharge({ account: devAccount(2), signer: devAccount(7), value: FEE }, "invalid_exact_evm_payload_signature", 1))

  it.effect("a payment whose amount was changed after signing is refused", () =>
    refusedWithoutCharge({ account: devAccount(2), value: FEE, signedValue: 1n }, "invalid_exact_evm_payload_signature", 1))

  it.effect("a payment signed for another token domain is refused", () =>
    refusedWithoutCharge({ account: devAccount(2), value: FEE, domainName: "USD Coin" }, "invalid_exact_evm_payload_signature", 1))

  it.effect("a payment to someone else is refused", () =>
    refusedWithoutCharge({ account: devAccount(2), value: FEE, to: devAccount(8).address }, "invalid_exact_evm_payload_recipient_mismatch", 1))

  it.effect("a payment on another network is refused", () =>
    refusedWithoutCharge({ account: devAccount(2), value: FEE, network: "base" }, "invalid_network", 1))

  it.effect("a payer without funds is refused before anything is submitted", () =>
    refusedWithoutCharge({ account: strangerAccount(), value: FEE }, "insufficient_funds", 1))

  it.effect("a payment header replayed for another registration is refused and charges nothing", () =>
    Effect.gen(function* () {
      const payer = devAccount(2)
      const { header } = yield* Effect.promise(() => signPayment({ account: payer, value: FEE }))
      const first = yield* register(yield* Effect.promise(() => withWalletProof(devAccount(1), registration(devAccount(1)))), header)
      expect(first.status).toBe(201)
      const balance = yield* Effect.promise(() => usdcBalance(payer.address))
      const replay = yield* register(registration(devAccount(3)), header)
      expect(replay.status).toBe(402)
      expect(replay.body.error?.details.reason).toBe("payment_already_used")
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(balance)
      const { sql } = yield* TestEnv
      expect(yield* sql`SELECT 1 FROM agents WHERE wallet = ${devAccount(3).address.toLowerCase()}`).toHaveLength(0)
    }))

  it.effect("the same payment header sent by ten concurrent requests is used exactly once", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const payer = devAccount(4)
      const owners = [5, 6, 7, 8, 9].map(devAccount)
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: FEE }))
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      // Each owner consents (walletProof); each body goes twice, so a twin of the winner is a re-send of it (issue 25).
      const bodies = yield* Effect.promise(() => Promise.all(owners.map((owner) => withWalletProof(owner, registration(owner)))))
      const responses = yield* Effect.all(
        [...bodies, ...bodies].map((body) => register(body, header)),
        { concurrency: "unbounded" }
      )
      const statuses = responses.map((r) => r.status).sort()
      // Every 201 names the one agent the payment registered (the winner, or its twin answered as a re-send).
      expect(new Set(responses.filter((r) => r.status === 201).map((r) => r.body.data.id)).size).toBe(1)
      expect(statuses.every((s) => s === 201 || s === 402 || s === 409 || s === 503)).toBe(true)
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(FEE)
      expect(yield* sql`SELECT 1 FROM payments WHERE nonce = ${nonce}`).toHaveLength(1)
      const active = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM agents WHERE status = 'active' AND registration_payment_id IN (SELECT id FROM payments WHERE nonce = ${nonce})`
      expect(active[0]?.n).toBe(1)
    }))

  it.effect("after a crash between settlement and bookkeeping, the recovery worker finds the on-chain transfer and activates the agent", () =>
    Effect.gen(function* () {
      const { sql, chain } = yield* TestEnv
      const payments = yield* Payments
      const verifier = yield* PaymentVerifier
      const payer = devAccount(2)
      const owner = strangerAccount()
      const { header } = yield* Effect.promise(() => signPayment({ account: payer, value: FEE }))
      const verified = yield* verifier.verify(header, FEE)
      const agentId = crypto.randomUUID()
      // What a request does before settlement: the reservation and the pending agent, in one transaction.
      const paymentId = yield* sql.withTransaction(
        Effect.gen(function* () {
          const id = yield* payments.reserve(verified, "registration", agentId)
          yield* sql`INSERT INTO agents ${sql.insert({
            id: agentId,
            wallet: owner.address.toLowerCase(),
            name: "Crashed",
            capabilities: JSON.stringify(registration(owner).capabilities.map((c) => ({ ...c, pricing: { ...c.pricing, basePrice: "0.010000" } }))),
            endpoints: JSON.stringify({ execution: "http://127.0.0.1:9/x" }),
            status: "pending",
            registrationPaymentId: id
          })}`
          return id
        })
      )
      // The settlement reaches the chain, then the process "dies" before recording it.
      const { r, s, v } = parseSignature(verified.signature)
      const hash = yield* Effect.promise(() =>
        walletFor(devAccount(9)).writeContract({
          address: chain.usdc.address,
          abi: usdcAbi,
          functionName: "transferWithAuthorization",
          args: [getAddress(verified.payer), verified.payTo, verified.amount, verified.validAfter, verified.validBefore, verified.nonce as Hex, Number(v), r, s]
        }))
      yield* Effect.promise(() => walletFor(devAccount(9)).waitForTransactionReceipt({ hash }))
      // The lease runs out; the worker takes over.
      yield* sql`UPDATE payments SET next_attempt_at = now() - interval '1 second' WHERE id = ${paymentId}`
      const handled = yield* payments.recoverDue
      expect(handled).toBeGreaterThanOrEqual(1)
      const [payment] = yield* sql<{ status: string; txHash: string }>`SELECT status, tx_hash FROM payments WHERE id = ${paymentId}`
      expect(payment).toEqual({ status: "settled", txHash: hash })
      const [agent] = yield* sql<{ status: string; registrationTxHash: string }>`SELECT status, registration_tx_hash FROM agents WHERE id = ${agentId}`
      expect(agent).toEqual({ status: "active", registrationTxHash: hash })
      const transfers = yield* sql`SELECT 1 FROM ledger_transfers WHERE payment_id = ${paymentId}`
      expect(transfers).toHaveLength(1)
      // Running it again changes nothing (idempotent).
      yield* sql`UPDATE payments SET next_attempt_at = now() - interval '1 second' WHERE id = ${paymentId}`
      yield* payments.recoverDue
      expect(yield* sql`SELECT 1 FROM ledger_transfers WHERE payment_id = ${paymentId}`).toHaveLength(1)
    }))

  it.effect("a reservation whose authorization expired unsettled is failed by the worker and frees the wallet", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const payments = yield* Payments
      const verifier = yield* PaymentVerifier
      const payer = devAccount(2)
      const owner = strangerAccount()
      const { header } = yield* Effect.promise(() => signPayment({ account: payer, value: FEE }))
      const verified = yield* verifier.verify(header, FEE)
      const agentId = crypto.randomUUID()
      const paymentId = yield* sql.withTransaction(
        Effect.gen(function* () {
          const id = yield* payments.reserve({ ...verified, validBefore: BigInt(Math.floor(Date.now() / 1000) - 5) }, "registration", agentId)
          yield* sql`INSERT INTO agents ${sql.insert({
            id: agentId,
            wallet: owner.address.toLowerCase(),
            name: "Never paid",
            capabilities: "[]",
            endpoints: JSON.stringify({ execution: "http://127.0.0.1:9/x" }),
            status: "pending"
          })}`
          return id
        })
      )
      yield* sql`UPDATE payments SET next_attempt_at = now() - interval '1 second' WHERE id = ${paymentId}`
      yield* payments.recoverDue
      const [payment] = yield* sql<{ status: string }>`SELECT status FROM payments WHERE id = ${paymentId}`
      expect(payment?.status).toBe("failed")
      expect(yield* sql`SELECT 1 FROM agents WHERE id = ${agentId}`).toHaveLength(0)
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, verified.nonce))).toBe(false)
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
