// Issue 24 #5: a `service-auth:` wallet signature (made for any owner action, a read included) never moves money to an
// address other than the registered wallet. Such a payout needs an EIP-712 `Withdrawal` signed over agent, amount,
// destination, nonce and deadline; each authorization pays once, and a changed amount or destination is refused. A
// payout to the registered wallet keeps working with the spec's headers.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import { getAddress, type Hex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, TREASURY, usdcBalance, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { signPayout } from "../support/payouts.js"
import { balanceOf, echoCapability, execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const freshWallet = () => privateKeyToAccount(`0x${randomBytes(32).toString("hex")}`).address.toLowerCase() as `0x${string}`

/** A premium agent (earnings available at once) owned by dev account `ownerIndex`, that earned two calls of 2.00 (3.40). */
const earningAgent = (ownerIndex: number) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(Date.now())
    const agent = yield* fakeAgent("echo")
    const owner = devAccount(ownerIndex)
    const agentId = yield* registerAgent(owner, agent.url, {
      tier: "premium",
      capabilities: [echoCapability({ pricing: { model: "per-request", basePrice: "2.00", currency: "USDC" } })]
    })
    for (const text of ["a", "b"]) {
      expect((yield* execute(devAccount(9), { targetAgentId: agentId, capabilityId: "echo", input: { text } })).status).toBe(200)
    }
    expect((yield* balanceOf(agentId)).body.data.available).toBe("3.400000")
    return { agentId, owner }
  })

const withdraw = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() => call(`${baseUrl}/api/v1/payments/withdraw`, { method: "POST", headers, json: body })))

const available = (agentId: string) => Effect.map(balanceOf(agentId), (r) => r.body.data.available as string)
const withdrawalsOf = (agentId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) => Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM withdrawals WHERE agent_id = ${agentId}`, (r) => r[0]?.n))
const usdc = (address: `0x${string}`) => Effect.promise(() => usdcBalance(address))
const sign = (...args: Parameters<typeof signPayout>) => Effect.promise(() => signPayout(...args))

layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }), { timeout: 120_000 })("withdrawal authorization", (it) => {
  it.scoped("attack: a wallet signature the owner made for a read, used first to withdraw to another address, is refused and takes nothing", () =>
    Effect.gen(function* () {
      const { agentId, owner } = yield* earningAgent(1)
      const { baseUrl } = yield* TestEnv
      // The owner signs for its payment history (a dashboard's read); whoever holds the headers races to the withdrawal.
      const forRead = yield* Effect.promise(() => walletAuth(owner, agentId))
      const attacker = freshWallet()
      const stolen = yield* withdraw({ agentId, amount: "3.40", destinationWallet: attacker }, forRead)
      expect(stolen.status).toBe(403)
      expect(stolen.body.error?.code).toBe("WITHDRAWAL_AUTHORIZATION_REQUIRED")
      expect(stolen.body.error?.details).toMatchObject({ registeredWallet: owner.address.toLowerCase(), destinationWallet: attacker, amount: "3.400000" })
      expect(yield* available(agentId)).toBe("3.400000")
      expect(yield* withdrawalsOf(agentId)).toBe(0)
      // The refusal did not use the owner's signature up: its read goes through.
      const history = yield* Effect.promise(() => call(`${baseUrl}/api/v1/payments/history/${agentId}`, { headers: forRead }))
      expect(history.status).toBe(200)
    }))

  it.scoped("a payout to the registered wallet keeps working with the spec's headers (no destination, or the registered one in any case)", () =>
    Effect.gen(function* () {
      const { agentId, owner } = yield* earningAgent(2)
      const before = yield* usdc(owner.address)
      const implicit = yield* withdraw({ agentId, amount: "1.20" }, yield* Effect.promise(() => walletAuth(owner, agentId)))
      expect(implicit.status, JSON.stringify(implicit.body)).toBe(202)
      const explicit = yield* withdraw({ agentId, amount: "1.20", destinationWallet: owner.address.toLowerCase() }, yield* Effect.promise(() => walletAuth(owner, agentId)))
      expect(explicit.status, JSON.stringify(explicit.body)).toBe(202)
      expect(explicit.body.data.destinationWallet).toBe(owner.address.toLowerCase())
      yield* (yield* TreasuryWorker).processDue
      expect(yield* usdc(owner.address)).toBe(before + 2n * 1_100_000n)
      expect(yield* available(agentId)).toBe("1.000000")
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("an EIP-712 Withdrawal signed by the registered wallet pays another address; the refusal of an unsigned one names what to sign", () =>
    Effect.gen(function* () {
      const { agentId, owner } = yield* earningAgent(3)
      const destination = freshWallet()
      const refused = yield* withdraw({ agentId, amount: "1.50", destinationWallet: destination }, yield* Effect.promise(() => walletAuth(owner, agentId)))
      expect(refused.body.error?.details?.typedData).toMatchObject({
        domain: { name: "Agent Marketplace", version: "1", chainId: 84532, verifyingContract: getAddress(TREASURY) },
        primaryType: "Withdrawal",
        message: { agentId, amount: "1500000", destination: getAddress(destination) }
      })
      const authorization = yield* sign(owner, { agentId, amount: 1_500_000n, destination })
      // No wallet-signature headers: the typed data is the authority.
      const accepted = yield* withdraw({ agentId, amount: "1.50", destinationWallet: destination, authorization })
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(202)
      expect(accepted.body.data).toMatchObject({ amount: "1.500000", netAmount: "1.400000", destinationWallet: destination, status: "pending" })
      yield* (yield* TreasuryWorker).processDue
      expect(yield* usdc(destination)).toBe(1_400_000n)
      expect(yield* available(agentId)).toBe("1.900000")
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a replayed authorization, an altered amount or destination, another wallet's, another deployment's, a personal-message signature or a bad deadline: refused, nothing taken", () =>
    Effect.gen(function* () {
      const { agentId, owner } = yield* earningAgent(4)
      const destination = freshWallet()
      const body = (authorization: unknown, overrides: Record<string, unknown> = {}) => ({ agentId, amount: "1.00", destinationWallet: destination, authorization, ...overrides })
      const payout = { agentId, amount: 1_000_000n, destination }
      const codeOf = (r: { status: number; body: { error?: { code: string } } }) => `${r.status} ${r.body.error?.code}`

      const good = yield* sign(owner, payout)
      expect(codeOf(yield* withdraw(body(good, { amount: "1.10" })))).toBe("401 AUTH_INVALID_SIGNATURE")
      expect(codeOf(yield* withdraw(body(good, { destinationWallet: freshWallet() })))).toBe("401 AUTH_INVALID_SIGNATURE")
      expect(codeOf(yield* withdraw(body({ ...good, deadline: good.deadline + 1 })))).toBe("401 AUTH_INVALID_SIGNATURE")
      expect(codeOf(yield* withdraw(body(yield* sign(devAccount(5), payout))))).toBe("401 AUTH_INVALID_SIGNATURE")
      expect(codeOf(yield* withdraw(body(yield* sign(owner, { ...payout, chainId: 8453 }))))).toBe("401 AUTH_INVALID_SIGNATURE")
      expect(codeOf(yield* withdraw(body(yield* sign(owner, { ...payout, verifyingContract: freshWallet() }))))).toBe("401 AUTH_INVALID_SIGNATURE")
      // A `service-auth:` signature put where the typed one goes recovers someone else.
      const personal = (yield* Effect.promise(() => walletAuth(owner, agentId)))["X-Agent-Signature"].split(":sig:")[1] as Hex
      expect(codeOf(yield* withdraw(body({ ...good, signature: personal })))).toBe("401 AUTH_INVALID_SIGNATURE")
      yield* TestClock.setTime(Date.now())
      const now = Math.floor(Date.now() / 1000)
      expect(codeOf(yield* withdraw(body(yield* sign(owner, { ...payout, deadline: now - 1 }))))).toBe("401 AUTH_EXPIRED")
      expect(codeOf(yield* withdraw(body(yield* sign(owner, { ...payout, deadline: now + 3600 }))))).toBe("400 VALIDATION_ERROR")
      expect(yield* withdrawalsOf(agentId)).toBe(0)
      expect(yield* available(agentId)).toBe("3.400000")

      // Used once; replayed, also concurrently (the balance would cover both), it pays nothing more.
      expect((yield* withdraw(body(good))).status).toBe(202)
      expect(codeOf(yield* withdraw(body(good)))).toBe("401 AUTH_SIGNATURE_REUSED")
      const twice = yield* sign(owner, payout)
      const raced = yield* Effect.all([withdraw(body(twice)), withdraw(body(twice))], { concurrency: 2 })
      expect(raced.map(codeOf).sort(), JSON.stringify(raced.map((r) => r.body))).toEqual(["202 undefined", "401 AUTH_SIGNATURE_REUSED"])
      expect(yield* withdrawalsOf(agentId)).toBe(2)
      expect(yield* available(agentId)).toBe("1.400000")
    }))
})
