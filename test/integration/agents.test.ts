import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { decodeXPaymentResponse } from "x402-fetch"
import { authorizationUsed, call, devAccount, paidCall, publicClient, signPayment, TREASURY, usdcBalance, walletAuth } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { ledgerMatchesChain } from "../support/scenario.js"
import { TestApp, TestEnv } from "../support/harness.js"

const REGISTRATION_FEE = 100_000n

layer(TestApp(), { excludeTestServices: true })("agent registry", (it) => {
  it.effect("the official x402 client pays 0.10 USDC on chain and the agent appears in the registry", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const owner = devAccount(1)
      const before = yield* Effect.promise(() => usdcBalance(TREASURY))
      const response = yield* Effect.promise(() => paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner) }))
      const body = response.body
      expect(response.status).toBe(201)
      expect(body.success).toBe(true)
      expect(body.data).toMatchObject({ wallet: owner.address.toLowerCase(), name: "Summarizer", status: "active" })
      expect(body.data.registrationTxId).toMatch(/^0x[0-9a-f]{64}$/)

      const after = yield* Effect.promise(() => usdcBalance(TREASURY))
      expect(after - before).toBe(REGISTRATION_FEE)
      const receipt = yield* Effect.promise(() => publicClient().getTransactionReceipt({ hash: body.data.registrationTxId }))
      expect(receipt.status).toBe("success")

      const settlement = decodeXPaymentResponse(response.headers.get("x-payment-response") ?? "")
      expect(settlement).toMatchObject({ success: true, transaction: body.data.registrationTxId, network: "base-sepolia" })
      expect(settlement.payer.toLowerCase()).toBe(owner.address.toLowerCase())

      const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${body.data.id}`))
      expect(read.status).toBe(200)
      expect(read.body.data).toMatchObject({
        id: body.data.id,
        status: "active",
        reputation_score: 50,
        health_score: 1,
        circuitState: "closed",
        trustTier: "new",
        settlementType: "delayed",
        settlementDelay: "24h",
        tags: ["nlp", "text"]
      })
      expect(read.body.data.capabilities[0].pricing).toEqual({ model: "per-request", basePrice: "0.010000", currency: "USDC" })
      expect(read.body.meta).toEqual({ cached: false, cacheSource: "database" })
      // The next read is served from memory, once the cache's listener is current (its heartbeat back within 500 ms:
      // on a loaded machine a read may go to the database a little longer, as designed).
      const again = yield* Effect.promise(async () => {
        for (let i = 0; ; i++) {
          const r = await call(`${baseUrl}/api/v1/agents/${body.data.id}`)
          if (r.body.meta?.cached === true || i >= 30) return r
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      })
      expect(again.body.meta).toEqual({ cached: true, cacheSource: "memory" })

      // The fee is one balanced ledger transfer: treasury debited, platform revenue credited.
      const entries = yield* sql<{ accountId: string; amount: string }>`
        SELECT e.account_id, e.amount::text FROM ledger_entries e JOIN ledger_transfers t ON t.id = e.transfer_id
        WHERE t.agent_id = ${body.data.id} AND t.kind = 'registration_fee' ORDER BY e.amount`
      expect(entries).toEqual([
        { accountId: "platform_revenue", amount: "-100000" },
        { accountId: "treasury", amount: "100000" }
      ])
      const events = yield* sql<{ eventType: string }>`SELECT event_type FROM outbox_events WHERE agent_id = ${body.data.id} ORDER BY seq`
      expect(events.map((e) => e.eventType)).toEqual(["payment.received", "agent.registered"])

      const wallet = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/check-wallet/${owner.address}`))
      expect(wallet.body.data).toEqual({ exists: true, agentId: body.data.id })
    }))

  it.effect("a wallet that already has an agent is refused before payment, and nothing is charged", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(3)
      const first = yield* Effect.promise(() => paidCall(devAccount(3), `${baseUrl}/api/v1/agents`, { json: registration(owner) }))
      expect(first.status).toBe(201)
      const payer = devAccount(4)
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: REGISTRATION_FEE }))
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const second = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/agents`, { method: "POST", json: registration(owner, { name: "Other" }), headers: { "X-PAYMENT": header } }))
      expect(second.status).toBe(409)
      expect(second.body.error?.code).toBe("WALLET_ALREADY_REGISTERED")
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
    }))

  it.effect("an owner updates and deactivates the agent with a wallet signature, and the read cache follows", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(5)
      const created = yield* Effect.promise(() => paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner) }))
      const id: string = created.body.data.id
      // Warm the cache. The activation's own invalidation (a notification from the database) may land after the first
      // read and evict it once: read until a read is served from the cache.
      const cached = yield* Effect.promise(async () => {
        for (let i = 0; i < 50; i++) {
          const read = await call(`${baseUrl}/api/v1/agents/${id}`)
          if (read.body.meta?.cached === true) return read
          await new Promise((r) => setTimeout(r, 50))
        }
        return await call(`${baseUrl}/api/v1/agents/${id}`)
      })
      expect(cached.body.meta.cached).toBe(true)

      const patched = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/agents/${id}`, {
          method: "PATCH",
          headers: await walletAuth(owner, id),
          json: { name: "Summarizer Pro", tags: ["NLP ", "pro"], chainSettings: { chain_enabled: true, chain_max_depth: 2 } }
        }))
      expect(patched.status).toBe(200)
      expect(patched.body.data).toMatchObject({ name: "Summarizer Pro", tags: ["nlp", "pro"], chain_enabled: true })
      expect(patched.body.data.chainSettings.chain_max_depth).toBe(2)

      const fresh = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`))
      expect(fresh.body.meta).toEqual({ cached: false, cacheSource: "database" })
      expect(fresh.body.data.name).toBe("Summarizer Pro")

      const removed = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/agents/${id}`, { method: "DELETE", headers: await walletAuth(owner, id) }))
      expect(removed.status).toBe(200)
      expect(removed.body.data).toEqual({ id, status: "inactive" })
      const inactive = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`))
      expect(inactive.body.data.status).toBe("inactive")
      expect(inactive.body.data.name).toBe("Summarizer Pro")
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})

