// The database knows which chain it belongs to: a start against another chain (a new devnet: another genesis block)
// refuses with one line saying what to do, before the treasury sends anything; the same chain starts as before.
import { ConfigProvider, Effect, Exit, Layer, Option } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { createPublicClient, createWalletClient, http } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { Chain, connectChain } from "../../layers/Chain.js"
import { ConfigLive } from "../../layers/Config.js"
import { DEV_PRIVATE_KEYS, type Devnet, devnetChain, startDevnet } from "../../layers/devnet/anvil.js"
import { makeServicesLive } from "../../src/App.js"
import { describeStartupFailure } from "../../src/startupFailure.js"

const treasuryKey = DEV_PRIVATE_KEYS[0]!
const treasury = privateKeyToAccount(treasuryKey)

const chainOf = (devnet: Devnet, mode: "devnet" | "rpc") =>
  Layer.effect(Chain, connectChain({
    mode,
    rpcUrl: devnet.rpcUrl,
    usdcAddress: devnet.usdcAddress,
    signerKey: Option.some(treasuryKey),
    treasuryAddress: Option.none(),
    batcherAddress: Option.some(devnet.batcherAddress)
  }))

const publicClient = (devnet: Devnet) => createPublicClient({ chain: devnetChain(devnet.rpcUrl), transport: http(devnet.rpcUrl) })
const treasuryNonce = (devnet: Devnet) => publicClient(devnet).getTransactionCount({ address: treasury.address, blockTag: "pending" })

/** Everything a start builds before it serves: database, chain-identity check, services, treasury start (nonce sync, gap repair). */
const start = (databaseUrl: string, dataDir: string, devnet: Devnet, mode: "devnet" | "rpc" = "devnet") =>
  Effect.runPromiseExit(
    Effect.scoped(Layer.build(makeServicesLive(chainOf(devnet, mode)))).pipe(
      Effect.provide(ConfigLive),
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map([
        ["DATABASE_URL", databaseUrl],
        ["DATA_DIR", dataDir],
        ["OPERATOR_TOKEN", "chain-identity-operator-token"],
        ["BACKGROUND_WORKERS", "false"],
        ["DATABASE_POOL_SIZE", "4"],
        ["LOG_LEVEL", "warn"]
      ])))
    )
  )

const admin = async (text: string) => {
  const client = new pg.Client(inject("pgAdminUrl"))
  await client.connect()
  try {
    return await client.query(text)
  } finally {
    await client.end()
  }
}

describe("a database used with one devnet chain", () => {
  const devnets: Array<Devnet> = []
  const name = `identity_${Date.now().toString(36)}`
  const databaseUrl = inject("pgAdminUrl").replace(/\/postgres$/, `/${name}`)
  let dataDir = ""
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "marketplace-identity-"))
    await admin(`CREATE DATABASE ${name} TEMPLATE ${inject("pgTemplate")}`)
    const cache = join(process.cwd(), "node_modules", ".cache", "test-usdc")
    devnets.push(await startDevnet({ port: 0, compileCacheDir: cache }))
  }, 60_000)
  afterAll(async () => {
    await Promise.all(devnets.map((d) => d.stop()))
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await rm(dataDir, { recursive: true, force: true })
  })

  it("starts again on the same chain", async () => {
    const first = devnets[0]!
    // The treasury took nonces on this chain (sent by another writer here; the service's nonce row catches up at start),
    // so that this database's next nonce is ahead of what a new devnet's treasury has used.
    const wallet = createWalletClient({ account: treasury, chain: devnetChain(first.rpcUrl), transport: http(first.rpcUrl) })
    for (let i = 0; i < 3; i++) {
      const hash = await wallet.sendTransaction({ to: treasury.address, value: 0n })
      await publicClient(first).waitForTransactionReceipt({ hash, pollingInterval: 20 })
    }
    expect(Exit.isSuccess(await start(databaseUrl, dataDir, first))).toBe(true)
    expect(Exit.isSuccess(await start(databaseUrl, dataDir, first))).toBe(true)
  }, 60_000)

  it("started against a new devnet chain, refuses with one line saying what to do, and the treasury sends nothing", async () => {
    // A new devnet, as after a start over: another genesis block (its timestamp is the second anvil started in), so
    // another block 1 on top of it. A person starting over is seconds later; here, at least the next second.
    const genesis = await publicClient(devnets[0]!).getBlock({ blockNumber: 0n })
    while (BigInt(Math.floor(Date.now() / 1000)) <= genesis.timestamp) await new Promise((r) => setTimeout(r, 50))
    const other = await startDevnet({ port: 0, compileCacheDir: join(process.cwd(), "node_modules", ".cache", "test-usdc") })
    devnets.push(other)
    const first = devnets[0]!
    const before = await treasuryNonce(other)
    expect(before).toBeLessThan(await treasuryNonce(first))
    const exit = await start(databaseUrl, dataDir, other)
    if (Exit.isSuccess(exit)) throw new Error("the start against another chain succeeded")
    const line = describeStartupFailure(exit.cause, "0")
    const [blockFirst, blockOther] = await Promise.all([first, other].map((d) => publicClient(d).getBlock({ blockNumber: 1n }).then((b) => b.hash)))
    expect(blockOther).not.toBe(blockFirst)
    expect(line).toBe(
      `this database belongs to another chain: network "base-sepolia" is chain id 84532, block 1 ${blockFirst}, USDC ${first.usdcAddress}, ` +
        `batcher ${first.batcherAddress}, but the chain now has block 1 ${blockOther}. ` +
        "To start over on this devnet, give it a fresh database (a new, empty DATABASE_URL); nothing was sent"
    )
    expect(line).not.toContain("\n")
    expect(await treasuryNonce(other)).toBe(before)

    // The same database through an RPC (as in production): the line names the chain the database belongs to and
    // says to point the RPC setting there or use a new database; still nothing sent.
    const viaRpc = await start(databaseUrl, dataDir, other, "rpc")
    if (Exit.isSuccess(viaRpc)) throw new Error("the start through an RPC against another chain succeeded")
    expect(describeStartupFailure(viaRpc.cause, "0")).toBe(
      line.replace(
        "To start over on this devnet, give it a fresh database (a new, empty DATABASE_URL)",
        "Point the RPC setting at the chain this database belongs to, or give this chain a new, empty database (DATABASE_URL)"
      )
    )
    expect(await treasuryNonce(other)).toBe(before)
  }, 60_000)
})
