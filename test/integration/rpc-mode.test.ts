// CHAIN_RPC_URL set: the same code against "a real chain" (here the run's anvil, with a treasury key that is not a dev key).
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { createTestClient, type Hex, http, parseEther } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { inject } from "vitest"
import { ConfigLive } from "../../layers/Config.js"
import { DEV_PRIVATE_KEYS } from "../../layers/devnet/anvil.js"
import { freePort } from "../../layers/embeddedPostgres.js"
import { AppLive } from "../../src/App.js"
import { call, devAccount, paidCall, usdcBalance } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { freshDatabase } from "../support/harness.js"

const rpcSettings = (overrides: Record<string, string>) =>
  Effect.gen(function* () {
    const db = yield* freshDatabase
    const port = yield* Effect.promise(freePort)
    const signingKey = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
    return {
      port,
      settings: new Map(Object.entries({
        DATABASE_URL: db.url,
        PORT: String(port),
        CHAIN_RPC_URL: inject("rpcUrl"),
        USDC_ADDRESS: inject("usdcAddress"),
        OPERATOR_TOKEN: "rpc-mode-operator-token-Xq7vR2mK9pL4wT8z",
        PROXY_SIGNING_KEY: signingKey,
        CLIENT_ID_SECRET: "rpc-mode-client-id-secret-0123456789abcdef",
        WEBHOOK_SECRET_KEY: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        CHAIN_TOKEN_SECRET: "rpc-mode-chain-token-secret-0123456789abcdef",
        BACKGROUND_WORKERS: "false",
        ...overrides
      }))
    }
  })

const build = (settings: Map<string, string>) =>
  Layer.build(AppLive.pipe(Layer.provide(ConfigLive), Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(settings)))))

describe("CHAIN_RPC_URL mode", () => {
  it.scopedLive("takes x402 payments into a configured treasury, with private agent URLs refused by default", () =>
    Effect.gen(function* () {
      const key = `0x${randomBytes(32).toString("hex")}` as Hex
      const treasury = privateKeyToAccount(key).address
      // The treasury pays gas in ETH; give it some on the test chain.
      const anvil = createTestClient({ mode: "anvil", transport: http(inject("rpcUrl")) })
      yield* Effect.promise(() => anvil.setBalance({ address: treasury, value: parseEther("100") }))
      const { port, settings } = yield* rpcSettings({ TREASURY_PRIVATE_KEY: key })
      yield* build(settings)
      const baseUrl = `http://127.0.0.1:${port}`
      const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(health.body.data).toMatchObject({ status: "ok", mode: "rpc", settlement: "local", chain: { treasury } })

      const privateUrl = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/agents`, { method: "POST", json: registration(devAccount(1), { endpoints: { execution: "http://127.0.0.1:9/x" } }) }))
      expect(privateUrl.status).toBe(400)

      const before = yield* Effect.promise(() => usdcBalance(treasury))
      const created = yield* Effect.promise(() =>
        paidCall(devAccount(2), `${baseUrl}/api/v1/agents`, {
          json: registration(devAccount(2), { endpoints: { execution: "http://93.184.216.34/execute" } })
        }))
      expect(created.status).toBe(201)
      expect((yield* Effect.promise(() => usdcBalance(treasury))) - before).toBe(100_000n)
      const operator = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/operator/agents/${created.body.data.id}/trust-tier`, {
          method: "POST",
          json: { tier: "premium", reason: "rpc mode test" },
          headers: { authorization: "Bearer rpc-mode-operator-token-Xq7vR2mK9pL4wT8z", "x-operator": "rpc test" }
        }))
      expect(operator.status).toBe(200)
    }), { timeout: 60_000 })

  it.scopedLive("refuses the well-known dev keys and incomplete settings outside devnet", () =>
    Effect.gen(function* () {
      const devKey = yield* rpcSettings({ TREASURY_PRIVATE_KEY: DEV_PRIVATE_KEYS[3] ?? "" })
      const refused = yield* Effect.exit(build(devKey.settings))
      expect(Exit.isFailure(refused)).toBe(true)
      expect(String(Exit.isFailure(refused) ? refused.cause : "")).toMatch(/dev key/)

      const missing = yield* rpcSettings({})
      const incomplete = yield* Effect.exit(build(missing.settings))
      expect(String(Exit.isFailure(incomplete) ? incomplete.cause : "")).toMatch(/TREASURY_PRIVATE_KEY/)

      // A facilitator takes payments in, but only the treasury key pays out: without it the start is refused.
      const receiveOnly = yield* rpcSettings({ FACILITATOR_URL: "http://127.0.0.1:9/facilitator", TREASURY_ADDRESS: devAccount(1).address })
      const refusedReceiveOnly = yield* Effect.exit(build(receiveOnly.settings))
      expect(String(Exit.isFailure(refusedReceiveOnly) ? refusedReceiveOnly.cause : "")).toMatch(/required: .*TREASURY_PRIVATE_KEY/)
      // Payments must arrive where payouts are signed.
      const elsewhere = yield* rpcSettings({ TREASURY_PRIVATE_KEY: `0x${randomBytes(32).toString("hex")}`, TREASURY_ADDRESS: devAccount(1).address })
      const refusedElsewhere = yield* Effect.exit(build(elsewhere.settings))
      expect(String(Exit.isFailure(refusedElsewhere) ? refusedElsewhere.cause : "")).toMatch(/is not the address of TREASURY_PRIVATE_KEY/)

      const noProxyKey = yield* rpcSettings({ TREASURY_PRIVATE_KEY: `0x${randomBytes(32).toString("hex")}` })
      noProxyKey.settings.delete("PROXY_SIGNING_KEY")
      const withoutKey = yield* Effect.exit(build(noProxyKey.settings))
      expect(String(Exit.isFailure(withoutKey) ? withoutKey.cause : "")).toMatch(/PROXY_SIGNING_KEY/)

      // The devnet's public client-id secret would let anyone forge a payer's X-Client-Id.
      const noClientSecret = yield* rpcSettings({ TREASURY_PRIVATE_KEY: `0x${randomBytes(32).toString("hex")}` })
      noClientSecret.settings.delete("CLIENT_ID_SECRET")
      const withoutSecret = yield* Effect.exit(build(noClientSecret.settings))
      expect(String(Exit.isFailure(withoutSecret) ? withoutSecret.cause : "")).toMatch(/required: CLIENT_ID_SECRET/)
      // Likewise the devnet's public chain-token key would let anyone mint chain tokens and spend others' budgets.
      const noChainSecret = yield* rpcSettings({ TREASURY_PRIVATE_KEY: `0x${randomBytes(32).toString("hex")}` })
      noChainSecret.settings.delete("CHAIN_TOKEN_SECRET")
      const withoutChainSecret = yield* Effect.exit(build(noChainSecret.settings))
      expect(String(Exit.isFailure(withoutChainSecret) ? withoutChainSecret.cause : "")).toMatch(/required: .*CHAIN_TOKEN_SECRET/)
    }), { timeout: 60_000 })
})
