import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { call, devAccount, strangerAccount, TREASURY, usdcBalance } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { limitsUrl, setLimits, signLimits as sign, usdc, wire } from "../support/limits.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

/** An echo call: 0.01 to the agent plus the 0.001 platform fee. */
const PRICE = 11_000n

const echo = (agentId: string, text: string) => ({ targetAgentId: agentId, capabilityId: "echo", input: { text } })

layer(TestApp({ RATE_LIMIT_CLIENT_PER_WINDOW: "1000", RATE_LIMIT_AGENT_PER_WINDOW: "1000" }), { excludeTestServices: true })("payer spending limits", (it) => {
  it.scoped("limits are set and read with the payer wallet's signature; none, another signer's, a replay or a read signature is refused", () =>
    Effect.gen(function* () {
      const payer = devAccount(5)
      const url = yield* limitsUrl(payer.address)
      const limits = { perCallMax: 50_000n, perDayMax: 1_000_000n }

      const unsigned = yield* Effect.promise(() => call(url, { method: "PUT", json: wire(limits) }))
      expect(unsigned.status).toBe(401)
      expect(unsigned.body.error?.code).toBe("PAYER_AUTH_REQUIRED")
      const stranger = yield* Effect.promise(() => call(url, { method: "PUT", json: wire(limits), headers: {} }))
      expect(stranger.status).toBe(401)
      const wrongSigner = yield* sign(strangerAccount(), "set", payer.address, limits)
      const forged = yield* Effect.promise(() => call(url, { method: "PUT", json: wire(limits), headers: wrongSigner }))
      expect(forged.status).toBe(401)
      expect(forged.body.error?.code).toBe("PAYER_SIGNATURE_INVALID")
      // A signature over other limits does not carry this body.
      const otherBody = yield* sign(payer, "set", payer.address, { perCallMax: 1n })
      const swapped = yield* Effect.promise(() => call(url, { method: "PUT", json: wire(limits), headers: otherBody }))
      expect(swapped.body.error?.code).toBe("PAYER_SIGNATURE_INVALID")
      // Nothing was stored by any of them.
      const readHeaders = yield* sign(payer, "read", payer.address, undefined)
      expect((yield* Effect.promise(() => call(url, { headers: readHeaders }))).body.error?.code).toBe("SPENDING_LIMITS_NOT_FOUND")

      const signedAt = Date.now()
      const put = yield* setLimits(payer, limits, signedAt)
      expect(put.status).toBe(200)
      expect(put.body.data).toMatchObject({ wallet: payer.address.toLowerCase(), perCallMax: "0.050000", perDayMax: "1.000000", perAgentPerDayMax: null, allowedAgents: null, spentToday: "0.000000" })
      // The same signed request again (or an older one) is refused: each change is signed later than the last.
      const replay = yield* setLimits(payer, limits, signedAt)
      expect(replay.status).toBe(401)
      expect(replay.body.error?.code).toBe("AUTH_SIGNATURE_REUSED")

      const read = yield* Effect.promise(() => call(url, { headers: readHeaders }))
      expect(read.status).toBe(200)
      expect(read.body.data).toMatchObject({ perCallMax: "0.050000", perDayMax: "1.000000" })
      expect((yield* Effect.promise(() => call(url))).body.error?.code).toBe("PAYER_AUTH_REQUIRED")
      // A read signature is no authority to change anything.
      const asChange = yield* Effect.promise(() => call(url, { method: "DELETE", headers: readHeaders }))
      expect(asChange.body.error?.code).toBe("PAYER_SIGNATURE_INVALID")
      // Bad input is a 400 in the envelope, never a 500.
      for (const body of [{}, { perCallMax: "0" }, { perCallMax: "-1" }, { perDayMax: "abc" }, { allowedAgents: [] }, { allowedAgents: ["not-a-uuid"] }]) {
        const bad = yield* Effect.promise(() => call(url, { method: "PUT", json: body, headers: readHeaders }))
        expect(bad.status, JSON.stringify(body)).toBe(400)
        expect(bad.body.error?.code).toBe("VALIDATION_ERROR")
      }
      const badPath = yield* Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}/api/v1/payers/nope/limits`, { headers: readHeaders })))
      expect(badPath.status).toBe(400)
      // A wrong checksum in the path is the same wallet (addresses are compared without case).
      const mixed = `0x${payer.address.slice(2).split("").map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c.toLowerCase())).join("")}`
      const mixedRead = yield* Effect.flatMap(limitsUrl(mixed), (u) => Effect.promise(() => call(u, { headers: readHeaders })))
      expect(mixedRead.status).toBe(200)

      const removed = yield* sign(payer, "delete", payer.address, undefined, signedAt + 1)
      const del = yield* Effect.promise(() => call(url, { method: "DELETE", headers: removed }))
      expect(del.status).toBe(200)
      expect(del.body.data).toMatchObject({ removed: true })
      expect((yield* Effect.promise(() => call(url, { headers: readHeaders }))).body.error?.code).toBe("SPENDING_LIMITS_NOT_FOUND")
      // The first PUT, replayed after the removal, still cannot bring its limits back.
      expect((yield* setLimits(payer, limits, signedAt)).body.error?.code).toBe("AUTH_SIGNATURE_REUSED")
    }))

  it.scoped("a call over the per-call limit is refused with 402 before anything is reserved: nothing charged, the agent not called", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payer = devAccount(6)
      expect((yield* setLimits(payer, { perCallMax: PRICE - 1n })).status).toBe(200)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))

      const refused = yield* execute(payer, echo(agentId, "too dear"))
      expect(refused.status).toBe(402)
      expect(refused.body.error?.code).toBe("PAYMENT_REQUIRED")
      expect(refused.body.error?.details).toMatchObject({ reason: "spending_limit_exceeded", limit: "perCallMax", max: "0.010999", amount: "0.011000" })
      // Still an x402 challenge (the v2 header says why in its `error` field).
      const challenge = JSON.parse(Buffer.from(refused.headers.get("payment-required") ?? "", "base64").toString("utf8")) as { error?: string }
      expect(challenge.error).toBe("spending_limit_exceeded")
      expect(agent.calls).toHaveLength(0)
      const [held] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM payments WHERE lower(payer) = ${payer.address.toLowerCase()}`
      expect(held?.n).toBe(0)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)

      // Raised to the price: the same call goes through and is charged once.
      expect((yield* setLimits(payer, { perCallMax: PRICE })).status).toBe(200)
      const paid = yield* execute(payer, echo(agentId, "fine"))
      expect(paid.status).toBe(200)
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
    }))

  it.scoped("an allow-list refuses every other agent", () =>
    Effect.gen(function* () {
      const a = yield* fakeAgent("echo")
      const b = yield* fakeAgent("echo")
      const allowed = yield* registerAgent(devAccount(2), a.url, { tier: "premium" })
      const other = yield* registerAgent(devAccount(3), b.url, { tier: "premium" })
      const payer = devAccount(7)
      expect((yield* setLimits(payer, { allowedAgents: [allowed] })).status).toBe(200)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))

      const refused = yield* execute(payer, echo(other, "not on my list"))
      expect(refused.status).toBe(402)
      expect(refused.body.error?.details).toMatchObject({ reason: "spending_limit_exceeded", limit: "allowedAgents", agentId: other })
      expect(b.calls).toHaveLength(0)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)

      expect((yield* execute(payer, echo(allowed, "on my list"))).status).toBe(200)
      expect(a.calls).toHaveLength(1)
    }))

  it.scoped("a per-agent daily limit refuses the next call to that agent, not to another", () =>
    Effect.gen(function* () {
      const a = yield* fakeAgent("echo")
      const b = yield* fakeAgent("echo")
      const first = yield* registerAgent(devAccount(9), a.url, { tier: "premium" })
      const second = yield* registerAgent(devAccount(6), b.url, { tier: "premium" })
      const payer = devAccount(5)
      expect((yield* setLimits(payer, { perAgentPerDayMax: PRICE, perDayMax: 10n * PRICE })).status).toBe(200)
      expect((yield* execute(payer, echo(first, "one"))).status).toBe(200)
      const again = yield* execute(payer, echo(first, "two"))
      expect(again.status).toBe(402)
      expect(again.body.error?.details).toMatchObject({ reason: "spending_limit_exceeded", limit: "perAgentPerDayMax", agentId: first, max: "0.011000", spent: "0.011000" })
      expect(a.calls).toHaveLength(1)
      expect((yield* execute(payer, echo(second, "three"))).status).toBe(200)
      // The refused call left the day's total as it was: two calls counted.
      const read = yield* sign(payer, "read", payer.address, undefined)
      const view = yield* Effect.flatMap(limitsUrl(payer.address), (url) => Effect.promise(() => call(url, { headers: read })))
      expect(view.body.data).toMatchObject({ spentToday: usdc(2n * PRICE), spentTodayByAgent: { [first]: usdc(PRICE), [second]: usdc(PRICE) } })
    }))

  it.scoped("50 concurrent calls against a daily limit of 7 calls: exactly 7 pass, 43 get 402, ledger = chain", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const ledger = yield* Ledger
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(4), agent.url, { tier: "premium" })
      const payer = devAccount(8)
      const allowedCalls = 7n
      expect((yield* setLimits(payer, { perDayMax: allowedCalls * PRICE })).status).toBe(200)
      const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const ledgerBefore = yield* ledger.balance(Accounts.treasury)

      const responses = yield* Effect.all(
        Array.from({ length: 50 }, (_, i) => execute(payer, echo(agentId, `n${i}`))),
        { concurrency: "unbounded" }
      )
      const statuses = responses.map((r) => r.status)
      expect(statuses.filter((s) => s === 200)).toHaveLength(Number(allowedCalls))
      expect(statuses.filter((s) => s === 402)).toHaveLength(50 - Number(allowedCalls))
      expect(responses.filter((r) => r.status === 402).every((r) => r.body.error?.details?.["limit"] === "perDayMax")).toBe(true)
      expect(agent.calls).toHaveLength(Number(allowedCalls))

      expect(payerBefore - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(allowedCalls * PRICE)
      expect((yield* Effect.promise(() => usdcBalance(TREASURY))) - treasuryBefore).toBe(allowedCalls * PRICE)
      expect((yield* ledger.balance(Accounts.treasury)) - ledgerBefore).toBe(allowedCalls * PRICE)
      expect(yield* sql`SELECT * FROM ledger_unbalanced_transfers`).toEqual([])
      expect(yield* ledgerMatchesChain).toBe(0n)

      const read = yield* sign(payer, "read", payer.address, undefined)
      const view = yield* Effect.flatMap(limitsUrl(payer.address), (url) => Effect.promise(() => call(url, { headers: read })))
      expect(view.body.data).toMatchObject({ spentToday: usdc(allowedCalls * PRICE), spentTodayByAgent: { [agentId]: usdc(allowedCalls * PRICE) } })
    }))
})
