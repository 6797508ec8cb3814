// Withdrawals end to end: an agent earns through paid calls (x402-fetch), its owner withdraws with a wallet signature,
// the payout lands on chain and is booked once; limits, auth and concurrent requests cannot overdraw; a crash between
// broadcasting and booking pays once. Afterwards the ledger's treasury equals the chain's, to the micro-USDC.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import { privateKeyToAccount } from "viem/accounts"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { encodeAbiParameters, keccak256, pad, toHex } from "viem"
import { inject } from "vitest"
import { call, devAccount, publicClient, TREASURY, usdcBalance, walletAuth } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { recordingLogs } from "../support/logs.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { signPayout } from "../support/payouts.js"
import { balanceOf, echoCapability, execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

/** Our clock starts at the real time (payments and signatures are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const freshWallet = () => privateKeyToAccount(`0x${randomBytes(32).toString("hex")}`).address.toLowerCase() as `0x${string}`

/** An agent (premium: earnings available at once) that earned `calls` paid calls of 2.00 USDC. */
const earningAgent = (ownerIndex: number, calls: number) =>
  Effect.gen(function* () {
    const agent = yield* fakeAgent("echo")
    const owner = devAccount(ownerIndex)
    const agentId = yield* registerAgent(owner, agent.url, {
      tier: "premium",
      capabilities: [echoCapability({ pricing: { model: "per-request", basePrice: "2.00", currency: "USDC" } })]
    })
    for (let i = 0; i < calls; i++) {
      const r = yield* execute(devAccount(9), { targetAgentId: agentId, capabilityId: "echo", input: { text: `w${i}` } })
      expect(r.status).toBe(200)
    }
    return { agentId, owner }
  })

const withdraw = (owner: ReturnType<typeof devAccount>, agentId: string, body: Record<string, unknown>, auth?: Record<string, string>) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const headers = auth ?? (yield* Effect.promise(() => walletAuth(owner, agentId)))
    return yield* Effect.promise(() => call(`${baseUrl}/api/v1/payments/withdraw`, { method: "POST", headers, json: { agentId, ...body } }))
  })

const get = (path: string) => Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}${path}`)))

layer(TestApp({ LOG_FORMAT: "json", LOG_LEVEL: "info", BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }))("withdrawals", (it) => {
  it.scoped("a payout that reverts (the treasury short of USDC) fails the withdrawal and gives the whole amount back to available", () =>
    Effect.gen(function* () {
      yield* realNow
      const { agentId, owner } = yield* earningAgent(7, 1)
      const available = (yield* balanceOf(agentId)).body.data.available as string
      // Empty the treasury's USDC in the token's storage (balanceOf is slot 1; `owner` is immutable, totalSupply slot 0)
      // so the payout transaction is mined and reverts; the treasury's nonces are untouched.
      const client = publicClient()
      const usdc = inject("usdcAddress")
      const slot = keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [TREASURY, 1n]))
      const held = yield* Effect.promise(() => usdcBalance(TREASURY))
      expect(BigInt((yield* Effect.promise(() => client.getStorageAt({ address: usdc, slot }))) ?? "0x0")).toBe(held)
      const setBalance = (value: bigint) =>
        Effect.promise(() => client.request({ method: "anvil_setStorageAt" as never, params: [usdc, slot, pad(toHex(value))] as never }))
      yield* setBalance(0n)

      const accepted = yield* withdraw(owner, agentId, { amount: "1.20" })
      expect(accepted.status).toBe(202)
      const id: string = accepted.body.data.withdrawalId
      const worker = yield* TreasuryWorker
      const logs = yield* recordingLogs
      yield* worker.processDue
      yield* setBalance(held)
      // Logged: the payout sent (amount), its revert, the withdrawal failed, each with its ids.
      const [sent] = logs.find("treasury.sent", { withdrawalId: id })
      expect(sent).toMatchObject({ purpose: "withdrawal", agentId, amountMicroUsdc: "1100000" })
      expect(logs.find("treasury.reverted", { treasuryTxId: sent!["treasuryTxId"] })).toHaveLength(1)
      expect(logs.find("withdrawal.failed", { withdrawalId: id })).toEqual([expect.objectContaining({ level: "error", cause: expect.stringContaining("reverted") })])

      const failed = (yield* get(`/api/v1/payments/withdrawal/${id}`)).body.data
      expect(failed).toMatchObject({ id, status: "failed", tx_hash: null })
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available, totalWithdrawn: "0.000000" })
      const { sql } = yield* TestEnv
      const events = yield* sql<{ eventType: string }>`SELECT event_type FROM outbox_events WHERE payload->>'withdrawalId' = ${id} ORDER BY created_at`
      expect(events.map((e) => e.eventType)).toEqual(["withdrawal.requested", "withdrawal.failed"])
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
  it.scoped("a withdrawal is paid on chain to the destination, net of the fee, and booked once", () =>
    Effect.gen(function* () {
      yield* realNow
      const { agentId, owner } = yield* earningAgent(6, 1)
      const before = (yield* balanceOf(agentId)).body.data
      const available = before.available as string
      expect(Number(available)).toBeGreaterThan(1.5)
      const destination = freshWallet()

      // Another address than the registered wallet: an EIP-712 authorization over amount and destination (issue 24).
      const authorization = yield* Effect.promise(() => signPayout(owner, { agentId, amount: 1_500_000n, destination }))
      const accepted = yield* withdraw(owner, agentId, { amount: "1.50", destinationWallet: destination, authorization })
      expect(accepted.status).toBe(202)
      expect(accepted.body.data).toMatchObject({ agentId, amount: "1.500000", fee: "0.100000", netAmount: "1.400000", destinationWallet: destination, status: "pending" })
      const id: string = accepted.body.data.withdrawalId
      expect(id).toMatch(/^wd_/)
      // Taken out of available at once.
      expect(Number((yield* balanceOf(agentId)).body.data.available)).toBeCloseTo(Number(available) - 1.5, 6)

      const worker = yield* TreasuryWorker
      const logs = yield* recordingLogs
      yield* worker.processDue
      const done = (yield* get(`/api/v1/payments/withdrawal/${id}`)).body.data
      expect(logs.find("withdrawal.paid_out", { withdrawalId: id })).toEqual([
        expect.objectContaining({ level: "info", agentId, to: destination, amountMicroUsdc: "1400000", txHash: done.tx_hash })
      ])
      expect(done).toMatchObject({ id, agent_id: agentId, status: "completed", amount: "1.500000", net_amount: "1.400000", destination_wallet: destination })
      expect(done.tx_hash).toMatch(/^0x[0-9a-f]{64}$/)
      expect(done.completed_at).not.toBeNull()
      expect(yield* Effect.promise(() => usdcBalance(destination))).toBe(1_400_000n)

      // Another pass changes nothing: booked and paid once.
      yield* TestClock.adjust(120_000)
      yield* worker.processDue
      expect(yield* Effect.promise(() => usdcBalance(destination))).toBe(1_400_000n)
      const list = (yield* get(`/api/v1/payments/withdrawals/${agentId}`)).body.data
      expect(list.summary).toEqual({ totalCount: 1, totalWithdrawn: "1.500000", pendingAmount: "0.000000" })
      expect(list.withdrawals.map((w: { id: string }) => w.id)).toEqual([id])
      expect((yield* balanceOf(agentId)).body.data.totalWithdrawn).toBe("1.500000")
      const { sql } = yield* TestEnv
      const events = yield* sql<{ eventType: string }>`SELECT event_type FROM outbox_events WHERE payload->>'withdrawalId' = ${id} ORDER BY created_at`
      expect(events.map((e) => e.eventType)).toEqual(["withdrawal.requested", "withdrawal.completed"])
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("below the minimum, above the balance, unsigned or replayed: refused, and nothing is taken", () =>
    Effect.gen(function* () {
      yield* realNow
      const { agentId, owner } = yield* earningAgent(5, 1)
      const available = (yield* balanceOf(agentId)).body.data.available as string

      const small = yield* withdraw(owner, agentId, { amount: "0.99" })
      expect({ status: small.status, code: small.body.error?.code }).toEqual({ status: 400, code: "VALIDATION_ERROR" })
      const tooMuch = yield* withdraw(owner, agentId, { amount: "1000.00" })
      expect({ status: tooMuch.status, code: tooMuch.body.error?.code }).toEqual({ status: 409, code: "INSUFFICIENT_BALANCE" })
      expect(tooMuch.body.error?.details?.available).toBe(available)
      const badWallet = yield* withdraw(owner, agentId, { amount: "1.00", destinationWallet: "0x1234" })
      expect(badWallet.status).toBe(400)
      const unsigned = yield* withdraw(owner, agentId, { amount: "1.00" }, {})
      expect({ status: unsigned.status, code: unsigned.body.error?.code }).toEqual({ status: 401, code: "AUTH_REQUIRED" })
      const stranger = yield* withdraw(owner, agentId, { amount: "1.00" }, yield* Effect.promise(() => walletAuth(devAccount(4), agentId)))
      expect({ status: stranger.status, code: stranger.body.error?.code }).toEqual({ status: 403, code: "AUTH_WALLET_MISMATCH" })

      const headers = yield* Effect.promise(() => walletAuth(owner, agentId))
      expect((yield* withdraw(owner, agentId, { amount: "1.00" }, headers)).status).toBe(202)
      const replayed = yield* withdraw(owner, agentId, { amount: "1.00" }, headers)
      expect({ status: replayed.status, code: replayed.body.error?.code }).toEqual({ status: 401, code: "AUTH_SIGNATURE_REUSED" })
      expect(Number((yield* balanceOf(agentId)).body.data.available)).toBeCloseTo(Number(available) - 1, 6)
      yield* (yield* TreasuryWorker).processDue
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("the payment history lists the agent's transactions newest first, for its owner's signature only (reusable: a read)", () =>
    Effect.gen(function* () {
      yield* realNow
      const { agentId, owner } = yield* earningAgent(4, 2)
      const { baseUrl } = yield* TestEnv
      const read = (headers: Record<string, string>, query = "") =>
        Effect.promise(() => call(`${baseUrl}/api/v1/payments/history/${agentId}${query}`, { headers }))
      const signed = yield* Effect.promise(() => walletAuth(owner, agentId))
      const history = yield* read(signed)
      expect(history.status).toBe(200)
      expect(history.body.data).toHaveLength(2)
      const [newest, older] = history.body.data
      expect(newest).toMatchObject({ providing_agent: agentId, capability_id: "echo", amount: "2.001000", status: "completed", requesting_agent: null })
      expect(newest.id).toMatch(/^tx_/)
      expect(Object.keys(newest)).not.toContain("gross_amount")
      expect(Date.parse(newest.created_at)).toBeGreaterThanOrEqual(Date.parse(older.created_at))
      const page = yield* read(yield* Effect.promise(() => walletAuth(owner, agentId)), "?limit=1&offset=1")
      expect(page.body.data.map((t: { id: string }) => t.id)).toEqual([older.id])
      // A read: the same signature serves again within its 5 minutes (test/integration/read-signatures.test.ts).
      expect((yield* read(signed)).body.data).toEqual(history.body.data)
      expect((yield* read({})).body.error?.code).toBe("AUTH_REQUIRED")
      expect((yield* read(yield* Effect.promise(() => walletAuth(devAccount(1), agentId)))).body.error?.code).toBe("AUTH_WALLET_MISMATCH")
      expect((yield* read(yield* Effect.promise(() => walletAuth(owner, agentId)), "?limit=0")).status).toBe(400)
      expect((yield* read(yield* Effect.promise(() => walletAuth(owner, agentId)), "?limit=abc")).status).toBe(400)
    }))

  it.scoped("10 concurrent withdrawals against a balance that covers 3: exactly 3 are accepted and paid", () =>
    Effect.gen(function* () {
      yield* realNow
      const { agentId, owner } = yield* earningAgent(3, 2)
      const available = Number((yield* balanceOf(agentId)).body.data.available)
      const each = (Math.floor((available / 3) * 1e6) / 1e6).toFixed(6)
      expect(Number(each) * 4).toBeGreaterThan(available)
      const signatures = yield* Effect.forEach(Array.from({ length: 10 }), () => Effect.promise(() => walletAuth(owner, agentId)))
      const results = yield* Effect.forEach(signatures, (headers) => withdraw(owner, agentId, { amount: each }, headers), { concurrency: 10 })
      expect(results.filter((r) => r.status === 202)).toHaveLength(3)
      expect(results.filter((r) => r.status === 409 && r.body.error?.code === "INSUFFICIENT_BALANCE")).toHaveLength(7)
      expect(Number((yield* balanceOf(agentId)).body.data.available)).toBeGreaterThanOrEqual(0)
      yield* (yield* TreasuryWorker).processDue
      const list = (yield* get(`/api/v1/payments/withdrawals/${agentId}`)).body.data
      expect(list.withdrawals.map((w: { status: string }) => w.status)).toEqual(["completed", "completed", "completed"])
      expect(yield* Effect.promise(() => usdcBalance(owner.address))).toBeGreaterThan(0n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})

/** Dies once after the first payout's bytes were broadcast: the process "crashes" before it reads the receipt. */
let crashed = false
layer(
  TestApp({ BACKGROUND_WORKERS: "false" }, {
    faults: {
      afterBroadcast: (tx) =>
        tx.purpose === "withdrawal" && !crashed ? Effect.sync(() => (crashed = true)).pipe(Effect.zipRight(Effect.die("crash after broadcast"))) : Effect.void
    }
  })
)("a crash while a payout is in flight", (it) => {
  it.scoped("after the crash the payout is found on chain and booked once: no second payment", () =>
    Effect.gen(function* () {
      yield* realNow
      const { agentId, owner } = yield* earningAgent(2, 1)
      const destination = freshWallet()
      const authorization = yield* Effect.promise(() => signPayout(owner, { agentId, amount: 1_200_000n, destination }))
      const accepted = yield* withdraw(owner, agentId, { amount: "1.20", destinationWallet: destination, authorization })
      expect(accepted.status).toBe(202)
      const worker = yield* TreasuryWorker
      yield* worker.processDue.pipe(Effect.catchAllDefect(() => Effect.void))
      expect(crashed).toBe(true)
      const id: string = accepted.body.data.withdrawalId
      expect((yield* get(`/api/v1/payments/withdrawal/${id}`)).body.data.status).toBe("processing")
      // The lease runs out; the worker follows the stored transaction to its receipt (it never signs a second one).
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust(61_000)
        yield* worker.processDue
      }
      expect((yield* get(`/api/v1/payments/withdrawal/${id}`)).body.data.status).toBe("completed")
      expect(yield* Effect.promise(() => usdcBalance(destination))).toBe(1_100_000n)
      const { sql } = yield* TestEnv
      expect(yield* sql`SELECT 1 FROM treasury_txs WHERE purpose = 'withdrawal' AND subject_id = ${id}`).toHaveLength(1)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
