// Production mode end to end: the real entry point (`npm start`'s start script) with CHAIN_RPC_URL, not devnet mode,
// against an anvil the test starts, a USDC deployed for the run, the batcher deployed by our deploy command and a
// freshly generated treasury key. Registration, paid calls (batched), a refund and a withdrawal move real money;
// afterwards the reconciliation reads zero drift and every balance is exact.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { createPublicClient, createTestClient, http, parseAbiItem } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { fakeAgent } from "../support/agents.js"
import { call, paidCall, walletAuth } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { freshDatabase } from "../support/harness.js"
import { tempDataDir, untilProcesses } from "../support/processes.js"
import { productionChain } from "../support/productionChain.js"
import { echoCapability } from "../support/scenario.js"
import { ensureBundle, serverProcess, type ServerProcess } from "../support/servers.js"

const OPERATOR = "production-mode-operator-token-Vk8tQ3nY6cW1zH5r"
const settled = parseAbiItem("event AuthorizationSettled(address indexed token, address indexed from, bytes32 indexed nonce, uint256 index, bool ok)")

const operatorHeaders = { authorization: `Bearer ${OPERATOR}`, "x-operator": "production test" }

/** A paid registration (the owner pays for its own wallet) of an instant-release agent. */
const registerAt = (server: ServerProcess, owner: PrivateKeyAccount, url: string, basePrice: string) =>
  Effect.promise(async () => {
    const created = await paidCall(owner, `${server.baseUrl}/api/v1/agents`, {
      json: registration(owner, {
        capabilities: [echoCapability({ pricing: { model: "per-request", basePrice, currency: "USDC" } })],
        endpoints: { execution: url }
      })
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const id = String(created.body.data.id)
    const pinned = await call(`${server.baseUrl}/api/v1/operator/agents/${id}/trust-tier`, {
      method: "POST",
      json: { tier: "premium", reason: "production test: instant release" },
      headers: operatorHeaders
    })
    expect(pinned.status).toBe(200)
    return id
  })

describe("production mode (CHAIN_RPC_URL, a fresh treasury key, our batcher)", () => {
  // Automine, and blocks every 2 s as on Base (12 s, Ethereum's, is measured by the bench: a minute per flow here).
  it.scopedLive.each([{ blocks: "automine", blockTime: undefined }, { blocks: "2 s blocks", blockTime: 2 }])(
    "$blocks: registrations, batched paid calls, a refund and a withdrawal settle on chain; ledger = chain", ({ blockTime }) =>
    Effect.gen(function* () {
      yield* Effect.promise(ensureBundle)
      const chain = yield* productionChain({ payers: 6, ...(blockTime === undefined ? {} : { blockTime }) })
      const db = yield* freshDatabase
      const dataDir = yield* tempDataDir("marketplace-production-")
      const server = yield* serverProcess({
        DATABASE_URL: db.url,
        DATA_DIR: dataDir,
        CHAIN_RPC_URL: chain.rpcUrl,
        USDC_ADDRESS: chain.usdc,
        TREASURY_PRIVATE_KEY: chain.treasuryKey,
        SETTLEMENT_BATCHER_ADDRESS: chain.batcher,
        OPERATOR_TOKEN: OPERATOR,
        PROXY_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
        CLIENT_ID_SECRET: "production-mode-client-id-secret-0123456789abcdef",
        WEBHOOK_SECRET_KEY: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        CHAIN_TOKEN_SECRET: "production-mode-chain-token-secret-0123456789abcdef",
        // The test's agents listen on loopback.
        ALLOW_PRIVATE_URLS: "true",
        EXECUTION_RETRY_WINDOW_SECONDS: "1",
        RATE_LIMIT_CLIENT_PER_WINDOW: "1000",
        LOG_LEVEL: "warn"
      })
      const health = yield* Effect.promise(() => call(`${server.baseUrl}/health`))
      expect(health.body.data).toMatchObject({ status: "ok", mode: "rpc", settlement: "local", chain: { treasury: chain.treasury } })
      const [owner, brokenOwner, ...payers] = chain.payers
      if (owner === undefined || brokenOwner === undefined) throw new Error("not enough payers")

      const echo = yield* fakeAgent("echo")
      const broken = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
      const earner = yield* registerAt(server, owner, echo.url, "1.00")
      const failing = yield* registerAt(server, brokenOwner, broken.url, "0.01")
      expect(yield* Effect.promise(() => chain.balanceOf(chain.treasury))).toBe(200_000n)

      // Eight concurrent paid calls of 1.001 (1.00 + the flat platform fee): behind the first, the rest go out batched.
      const startBlock = yield* Effect.promise(() => createPublicClient({ transport: http(chain.rpcUrl) }).getBlockNumber())
      const answers = yield* Effect.forEach(Array.from({ length: 8 }, (_, i) => i), (i) =>
        Effect.promise(() => paidCall(payers[i % payers.length]!, `${server.baseUrl}/api/v1/execute`, {
          json: { targetAgentId: earner, capabilityId: "echo", input: { text: `p${i}` } }
        })), { concurrency: "unbounded" })
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200))
      const batched = yield* Effect.promise(() =>
        createPublicClient({ transport: http(chain.rpcUrl) }).getLogs({ address: chain.batcher, event: settled, fromBlock: startBlock + 1n, toBlock: "latest" }))
      expect(batched.filter((log) => log.args.ok === true).length).toBeGreaterThan(0)
      expect(yield* Effect.promise(() => chain.balanceOf(chain.treasury))).toBe(200_000n + 8n * 1_001_000n)

      // A call whose output breaks its schema fails; once its retry window closes the treasury key refunds it.
      const payer = payers[0]!
      const before = yield* Effect.promise(() => chain.balanceOf(payer.address))
      const bad = yield* Effect.promise(() => paidCall(payer, `${server.baseUrl}/api/v1/execute`, {
        json: { targetAgentId: failing, capabilityId: "echo", input: { text: "bad" } }
      }))
      expect(bad.status).toBe(502)
      expect(yield* Effect.promise(() => chain.balanceOf(payer.address))).toBe(before - 11_000n)
      yield* untilProcesses(Effect.promise(() => chain.balanceOf(payer.address)), (balance) => balance === before, 30_000)

      // The earner's owner withdraws to its registered wallet: 8 × 0.85 = 6.80 available, 5.00 asked, 4.90 paid.
      const ownerBefore = yield* Effect.promise(() => chain.balanceOf(owner.address))
      const accepted = yield* Effect.promise(async () =>
        call(`${server.baseUrl}/api/v1/payments/withdraw`, { method: "POST", headers: await walletAuth(owner, earner), json: { agentId: earner, amount: "5.00" } }))
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(202)
      yield* untilProcesses(
        Effect.promise(() => call(`${server.baseUrl}/api/v1/payments/withdrawal/${accepted.body.data.withdrawalId}`)),
        (r) => r.body.data?.status === "completed",
        30_000
      )
      expect((yield* Effect.promise(() => chain.balanceOf(owner.address))) - ownerBefore).toBe(4_900_000n)

      // Every micro-USDC the treasury holds is explained by the ledger, at one final block: CHAIN_CONFIRMATIONS (the
      // chain id's default here, 5 for Base Sepolia) blocks after the last payout.
      const confirmations: number = health.body.data.chain.confirmations
      expect(confirmations).toBe(5)
      const paidOut = yield* Effect.promise(() => call(`${server.baseUrl}/api/v1/payments/withdrawal/${accepted.body.data.withdrawalId}`))
      const payoutBlock = (yield* Effect.promise(() =>
        createPublicClient({ transport: http(chain.rpcUrl) }).getTransactionReceipt({ hash: paidOut.body.data.tx_hash }))).blockNumber
      yield* Effect.promise(() => createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) }).mine({ blocks: confirmations }))
      const reconciliation = yield* Effect.promise(() => call(`${server.baseUrl}/api/v1/operator/treasury/reconciliation`, { headers: operatorHeaders }))
      expect(reconciliation.body.data.current).toMatchObject({ drift: "0", inFlightIncoming: "0", inFlightOutgoing: "0" })
      expect(BigInt(reconciliation.body.data.current.block)).toBeGreaterThanOrEqual(payoutBlock)
      expect(BigInt(reconciliation.body.data.current.chainBalance)).toBe(200_000n + 8n * 1_001_000n - 4_900_000n)
    }), { timeout: 180_000 })
})
