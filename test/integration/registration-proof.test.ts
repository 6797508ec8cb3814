// Issue 25, point 1: registering an agent proves control of its wallet. Paying the fee from that wallet is the proof;
// a fee paid by another wallet needs the agent wallet's EIP-712 signature over the registration (walletProof);
// anything else is refused before anything is charged.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { getAddress, keccak256, stringToBytes } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { authorizationUsed, call, devAccount, paidCall, signPayment, strangerAccount, TREASURY, usdcBalance } from "../support/clients.js"
import { registration, withWalletProof } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { ledgerMatchesChain } from "../support/scenario.js"

const FEE = 100_000n

// #region docs:wallet-proof
/** RFC 8785 canonical JSON for JSON values: keys sorted, no whitespace, strings and numbers as JSON.stringify writes them. */
const canonicalize = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonicalize).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalize((value as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(value)

/**
 * The agent wallet's consent to a registration whose fee another wallet pays: an EIP-712 signature over the body exactly
 * as it will be sent (without walletProof), good for 5 minutes. `chainId` is the payment network's (84532 on Base Sepolia).
 */
const signRegistration = async (owner: PrivateKeyAccount, body: { wallet: string; name: string; endpoints: { execution: string } }, chainId: number) => {
  const issuedAt = Date.now()
  const signature = await owner.signTypedData({
    domain: { name: "Agent Marketplace", version: "1", chainId },
    types: {
      AgentRegistration: [
        { name: "wallet", type: "address" },
        { name: "name", type: "string" },
        { name: "execution", type: "string" },
        { name: "registration", type: "bytes32" },
        { name: "issuedAt", type: "uint256" }
      ]
    },
    primaryType: "AgentRegistration",
    message: {
      wallet: getAddress(body.wallet),
      name: body.name,
      execution: body.endpoints.execution,
      registration: keccak256(stringToBytes(canonicalize(body))),
      issuedAt: BigInt(issuedAt)
    }
  })
  return { ...body, walletProof: { signature, issuedAt } }
}
// #endregion

layer(TestApp(), { excludeTestServices: true })("registration proves control of the wallet", (it) => {
  const register = (body: unknown, header?: string) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) =>
      Effect.promise(() => call(`${baseUrl}/api/v1/agents`, { method: "POST", json: body, ...(header === undefined ? {} : { headers: { "X-PAYMENT": header } }) })))

  const ledgerTransfers = Effect.flatMap(TestEnv, ({ sql }) =>
    Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_transfers`, (r) => r[0]?.n ?? 0))

  /** Sends `body` paid by `payer` and checks that nothing moved: balances, authorization, payments, agents, ledger. */
  const refusedWithoutCharge = (payer: PrivateKeyAccount, owner: PrivateKeyAccount, body: unknown, status: number, code: string) =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: FEE }))
      const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const transfersBefore = yield* ledgerTransfers
      const response = yield* register(body, header)
      expect({ status: response.status, code: response.body.error?.code }).toEqual({ status, code })
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore)
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
      expect(yield* sql`SELECT 1 FROM payments WHERE nonce = ${nonce}`).toHaveLength(0)
      expect(yield* sql`SELECT 1 FROM agents WHERE wallet = ${owner.address.toLowerCase()}`).toHaveLength(0)
      expect(yield* ledgerTransfers).toBe(transfersBefore)
      return response
    })

  it.effect("a fee paid by another wallet without the agent wallet's proof is refused with 403 WALLET_NOT_CONTROLLED, and nothing is charged", () =>
    Effect.gen(function* () {
      const victim = devAccount(1)
      const squatter = devAccount(2)
      const refused = yield* refusedWithoutCharge(squatter, victim, registration(victim, { endpoints: { execution: "http://127.0.0.1:9/squat" } }), 403, "WALLET_NOT_CONTROLLED")
      expect(refused.body.error?.details).toEqual({ wallet: victim.address.toLowerCase(), payer: squatter.address.toLowerCase() })
      const { baseUrl } = yield* TestEnv
      const wallet = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/check-wallet/${victim.address}`))
      expect(wallet.body.data).toEqual({ exists: false })
    }))

  it.effect("the owner paying from the agent's own wallet (docs/api-walkthrough.md's x402-fetch path) needs no proof", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(1)
      const before = yield* Effect.promise(() => usdcBalance(owner.address))
      const response = yield* Effect.promise(() => paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner) }))
      expect(response.status).toBe(201)
      expect(response.body.data).toMatchObject({ wallet: owner.address.toLowerCase(), status: "active" })
      expect(before - (yield* Effect.promise(() => usdcBalance(owner.address)))).toBe(FEE)
    }))

  it.effect("with the agent wallet's walletProof a third-party payer registers it: the agent is the owner's, the payer is charged once", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = strangerAccount()
      const payer = devAccount(3)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const body = yield* Effect.promise(() => withWalletProof(owner, registration(owner, { name: "Sponsored", tags: ["  NLP "] })))
      const response = yield* Effect.promise(() => paidCall(payer, `${baseUrl}/api/v1/agents`, { json: body }))
      expect(response.status).toBe(201)
      expect(response.body.data).toMatchObject({ wallet: owner.address.toLowerCase(), name: "Sponsored", status: "active" })
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(FEE)
      const agent = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${response.body.data.id}`))
      expect(agent.body.data).toMatchObject({ wallet: owner.address.toLowerCase(), tags: ["nlp"] })
      expect(agent.body.data.walletProof).toBeUndefined()
    }))

  it.effect("the documented client-side signing (docs/clients.md) is accepted: a sponsor pays with x402-fetch for the owner's agent", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = strangerAccount()
      const sponsor = devAccount(5)
      const response = yield* Effect.promise(async () => {
        const body = await signRegistration(owner, registration(owner, { name: "Documented" }), 84532)
        return paidCall(sponsor, `${baseUrl}/api/v1/agents`, { json: body })
      })
      expect(response.status).toBe(201)
      expect(response.body.data).toMatchObject({ wallet: owner.address.toLowerCase(), name: "Documented" })
    }))

  it.effect("a forged, altered, stale or malformed walletProof is refused with 401 before any payment, and nothing is charged", () =>
    Effect.gen(function* () {
      const owner = strangerAccount()
      const payer = devAccount(4)
      const body = registration(owner)
      const signed = yield* Effect.promise(() => withWalletProof(owner, body))
      const forged = yield* Effect.promise(() => withWalletProof(owner, body, { signer: devAccount(5) }))
      const stale = yield* Effect.promise(() => withWalletProof(owner, body, { issuedAt: Date.now() - 6 * 60_000 }))
      const ahead = yield* Effect.promise(() => withWalletProof(owner, body, { issuedAt: Date.now() + 5 * 60_000 }))
      const cases: Array<[unknown, string]> = [
        [forged, "WALLET_PROOF_INVALID"],
        // The squatter keeps the owner's signature but points the endpoint at itself: the digest no longer matches.
        [{ ...signed, endpoints: { execution: "http://127.0.0.1:9/squat" } }, "WALLET_PROOF_INVALID"],
        [{ ...signed, capabilities: [{ ...body.capabilities[0], pricing: { model: "per-request", basePrice: "9", currency: "USDC" } }] }, "WALLET_PROOF_INVALID"],
        // The owner's proof for its own wallet says nothing about another wallet.
        [{ ...signed, wallet: devAccount(6).address }, "WALLET_PROOF_INVALID"],
        [{ ...signed, walletProof: { ...signed.walletProof, signature: "0x1234" } }, "WALLET_PROOF_INVALID"],
        [stale, "WALLET_PROOF_EXPIRED"],
        [ahead, "WALLET_PROOF_EXPIRED"]
      ]
      for (const [attempt, code] of cases) yield* refusedWithoutCharge(payer, owner, attempt, 401, code)
      // Checked before the 402 challenge: a client is never asked to pay for a registration that cannot pass.
      const unpaid = yield* register(forged)
      expect({ status: unpaid.status, code: unpaid.body.error?.code }).toEqual({ status: 401, code: "WALLET_PROOF_INVALID" })
    }))

  it.effect("a walletProof already used cannot register the wallet again (one agent per wallet), and nothing is charged", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = strangerAccount()
      const body = yield* Effect.promise(() => withWalletProof(owner, registration(owner)))
      const first = yield* Effect.promise(() => paidCall(devAccount(7), `${baseUrl}/api/v1/agents`, { json: body }))
      expect(first.status).toBe(201)
      const payer = devAccount(8)
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: FEE }))
      const replayed = yield* register(body, header)
      expect({ status: replayed.status, code: replayed.body.error?.code }).toEqual({ status: 409, code: "WALLET_ALREADY_REGISTERED" })
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
