// The embedded defaults (no DATABASE_URL, no CHAIN_RPC_URL, no OPERATOR_TOKEN) keep everything across a restart, the
// devnet's operator token included.
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, Redacted } from "effect"
import { chmod, mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createPublicClient, createWalletClient, http, publicActions } from "viem"
import { wrapFetchWithPayment } from "x402-fetch"
import { Chain } from "../../layers/Chain.js"
import { ConfigLive } from "../../layers/Config.js"
import { devnetChain } from "../../layers/devnet/anvil.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { freePort } from "../../layers/embeddedPostgres.js"
import { AppLive } from "../../src/App.js"
import { OperatorToken } from "../../src/http/OperatorHttp.js"
import { call, devAccount } from "../support/clients.js"
import { registration } from "../support/fixtures.js"

describe("embedded defaults", () => {
  it.scopedLive("an agent registered before a restart is still there after it, and so are the chain state and the operator token", () =>
    Effect.gen(function* () {
      const dataDir = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const dir = await mkdtemp(join(tmpdir(), "marketplace-restart-"))
          await chmod(dir, 0o755)
          return dir
        }),
        (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
      )
      const [port, devnetPort] = yield* Effect.promise(() => Promise.all([freePort(), freePort()]))
      const settings = new Map([
        ["DATA_DIR", dataDir],
        ["PORT", String(port)],
        ["DEVNET_PORT", String(devnetPort)],
        ["BACKGROUND_WORKERS", "false"]
      ])
      // One run of the whole service with its embedded PostgreSQL and its own devnet.
      const run = <A>(body: (chain: typeof Chain.Service, operatorToken: string) => Effect.Effect<A>) =>
        Effect.scoped(
          Effect.gen(function* () {
            const context = yield* Layer.build(
              AppLive.pipe(Layer.provide(ConfigLive), Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(settings))))
            )
            return yield* body(Context.get(context, Chain), Redacted.value(Context.get(context, OperatorToken)))
          })
        )
      const baseUrl = `http://127.0.0.1:${port}`
      const owner = devAccount(1)
      const first = yield* run((chain, operatorToken) =>
        Effect.promise(async () => {
          const wallet = createWalletClient({ account: owner, chain: devnetChain(chain.rpcUrl), transport: http(chain.rpcUrl) }).extend(publicActions)
          const pay = wrapFetchWithPayment(fetch, wallet as unknown as Parameters<typeof wrapFetchWithPayment>[1])
          const response = await pay(`${baseUrl}/api/v1/agents`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(registration(owner))
          })
          const body = (await response.json()) as { data: { id: string } }
          return { status: response.status, id: body.data.id, rpcUrl: chain.rpcUrl, usdc: chain.usdc.address, operatorToken }
        })
      )
      expect(first.status).toBe(201)
      const second = yield* run((chain, operatorToken) =>
        Effect.promise(async () => {
          const read = await call(`${baseUrl}/api/v1/agents/${first.id}`)
          const health = await call(`${baseUrl}/health`)
          const client = createPublicClient({ chain: devnetChain(chain.rpcUrl), transport: http(chain.rpcUrl) })
          const treasury = await client.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [chain.treasury] })
          // The first run's operator token still opens the operator API (devnet keeps it in DATA_DIR/operator-token).
          const operator = await call(`${baseUrl}/api/v1/operator/stats`, { headers: { authorization: `Bearer ${first.operatorToken}` } })
          return { read, health, treasury, usdc: chain.usdc.address, operatorToken, operator }
        })
      )
      expect(second.health.body.data.status).toBe("ok")
      expect(second.read.status).toBe(200)
      expect(second.read.body.data).toMatchObject({ id: first.id, status: "active", name: "Summarizer" })
      expect(second.usdc).toBe(first.usdc)
      expect(first.operatorToken).toMatch(/^devnet-/)
      expect(second.operatorToken).toBe(first.operatorToken)
      expect(second.operator.status).toBe(200)
      // The registration fee paid in the first run is still in the treasury: the chain state was restored, not redeployed.
      expect(second.treasury).toBe(100_000n)
    }), { timeout: 120_000 })
})
