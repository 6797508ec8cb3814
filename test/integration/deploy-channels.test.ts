// `npm run deploy:channels`: places our x402 channel and upto contracts at their canonical addresses on a bare anvil,
// finds them on a second run, leaves other code alone unless told to replace it, and refuses a chain that is not an
// anvil without writing anything.
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { createPublicClient, createTestClient, http } from "viem"
import { startDevnet } from "../../layers/devnet/anvil.js"
import { spawnAnvil, type AnvilProcess } from "../../layers/devnet/process.js"
import { CHANNEL_CONTRACTS } from "../../layers/devnet/channels/contracts.js"
import { BATCH_SETTLEMENT_ADDRESS, channelContractsPresent, UPTO_PERMIT2_PROXY_ADDRESS } from "../../layers/x402/channelContracts.js"
import { posingRpc } from "../support/posingRpc.js"

const run = promisify(execFile)
const cli = (...args: ReadonlyArray<string>) =>
  run(process.execPath, ["--import", "tsx", "src/tools/deployChannels.ts", ...args], { env: { PATH: process.env["PATH"] ?? "" }, timeout: 60_000 })

let anvil: AnvilProcess
beforeAll(async () => {
  anvil = await spawnAnvil({ port: 0 })
}, 30_000)
afterAll(() => anvil?.stop())

describe("deploy:channels", () => {
  it("places every contract on a bare anvil once; a second run finds them and changes nothing", async () => {
    const chain = createPublicClient({ transport: http(anvil.rpcUrl) })
    expect((await channelContractsPresent(chain, "eip155:84532")).present).toEqual([])

    const first = await cli("--rpc", anvil.rpcUrl)
    expect(first.stdout.trim().split("\n")).toEqual(CHANNEL_CONTRACTS.map((c) => `${c.name} ${c.address}: placed`))
    expect((await channelContractsPresent(chain, "eip155:84532")).present).toEqual(["batch-settlement", "upto"])
    for (const c of CHANNEL_CONTRACTS) {
      expect(await chain.getCode({ address: c.address })).toBe((await chain.call({ data: c.spec.shipped.bytecode })).data)
    }

    const second = await cli("--rpc", anvil.rpcUrl)
    expect(second.stdout.trim().split("\n")).toEqual(CHANNEL_CONTRACTS.map((c) => `${c.name} ${c.address}: present`))
  }, 120_000)

  it("leaves other code at an address alone unless --replace is given", async () => {
    const chain = createPublicClient({ transport: http(anvil.rpcUrl) })
    await createTestClient({ mode: "anvil", transport: http(anvil.rpcUrl) }).setCode({ address: UPTO_PERMIT2_PROXY_ADDRESS, bytecode: "0x6001" })
    await expect(cli("--rpc", anvil.rpcUrl)).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/x402UptoPermit2Proxy .*left alone/) })
    expect(await chain.getCode({ address: UPTO_PERMIT2_PROXY_ADDRESS })).toBe("0x6001")
    await cli("--rpc", anvil.rpcUrl, "--replace")
    expect((await channelContractsPresent(chain, "eip155:84532")).present).toEqual(["batch-settlement", "upto"])
  }, 120_000)

  it("refuses a chain that is not an anvil, and writes nothing to it", async () => {
    const bare = await spawnAnvil({ port: 0 })
    const geth = await posingRpc(bare.rpcUrl)
    try {
      await expect(cli("--rpc", geth.url)).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/is not an anvil .*Geth.*refusing/) })
      const chain = createPublicClient({ transport: http(bare.rpcUrl) })
      expect((await channelContractsPresent(chain, "eip155:84532")).present).toEqual([])
      await expect(cli()).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/--rpc is required/) })
    } finally {
      await geth.close()
      await bare.stop()
    }
  }, 120_000)

  it("a devnet restarted from its state file gets today's contracts again over whatever code the state held", async () => {
    const dir = await mkdtemp(join(tmpdir(), "devnet-channels-"))
    try {
      const stateFile = join(dir, "anvil-state.json")
      const first = await startDevnet({ port: 0, stateFile })
      await createTestClient({ mode: "anvil", transport: http(first.rpcUrl) }).setCode({ address: BATCH_SETTLEMENT_ADDRESS, bytecode: "0x6001" })
      await first.stop()
      const second = await startDevnet({ port: 0, stateFile })
      try {
        const chain = createPublicClient({ transport: http(second.rpcUrl) })
        const ours = CHANNEL_CONTRACTS.find((c) => c.address === BATCH_SETTLEMENT_ADDRESS)
        expect(await chain.getCode({ address: BATCH_SETTLEMENT_ADDRESS })).toBe(ours === undefined ? "missing" : (await chain.call({ data: ours.spec.shipped.bytecode })).data)
      } finally {
        await second.stop()
      }
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
