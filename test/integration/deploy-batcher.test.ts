// `npm run deploy:batcher`: deploys the shipped SettlementBatcher at its CREATE2 address with a fresh key, finds it on
// the second run without sending anything, and refuses the well-known dev keys on anything that is not a local anvil.
import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { promisify } from "node:util"
import { createPublicClient, createTestClient, http, parseEther } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, inject } from "vitest"
import { batcherAddressFor, deployBatcher } from "../../layers/batcherDeploy.js"
import { DEV_PRIVATE_KEYS } from "../../layers/devnet/anvil.js"
import { shippedSettlementBatcher } from "../../layers/devnet/settlementBatcher.generated.js"

const run = promisify(execFile)
const rpcUrl = inject("rpcUrl")
const anvil = createTestClient({ mode: "anvil", transport: http(rpcUrl) })
const chain = createPublicClient({ transport: http(rpcUrl) })

/** The CLI as an operator runs it: tsx, the key in the environment, the settings on stdout. */
const cli = (env: Record<string, string>, ...args: ReadonlyArray<string>) =>
  run(process.execPath, ["--import", "tsx", "src/tools/deployBatcher.ts", ...args], {
    env: { PATH: process.env["PATH"] ?? "", ...env },
    timeout: 60_000
  })

/** An RPC in front of the anvil that says it is geth: the deploy must then treat the chain as a real one. */
const servers: Array<Server> = []
const posingAsGeth = async (): Promise<string> => {
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString()
      const request = JSON.parse(body) as { id: number; method: string }
      if (request.method === "web3_clientVersion") {
        res.setHeader("content-type", "application/json")
        res.end(JSON.stringify({ jsonrpc: "2.0", id: request.id, result: "Geth/v1.14.12-stable/linux-amd64/go1.23" }))
        return
      }
      fetch(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body })
        .then(async (upstream) => res.end(await upstream.text()))
        .catch(() => res.destroy())
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}
afterAll(() => Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve)))))

describe("deploy:batcher", () => {
  it("deploys the shipped batcher once with a fresh key; a second run finds it and sends nothing", async () => {
    const key = generatePrivateKey()
    const deployer = privateKeyToAccount(key).address
    await anvil.setBalance({ address: deployer, value: parseEther("1") })
    const address = batcherAddressFor()

    const first = await cli({ DEPLOYER_PRIVATE_KEY: key }, "--rpc", rpcUrl)
    expect(first.stdout.trim()).toBe(`SETTLEMENT_BATCHER_ADDRESS=${address}`)
    expect(first.stderr).not.toContain(key.slice(2))
    const code = await chain.getCode({ address })
    const runtime = (await chain.call({ data: shippedSettlementBatcher.bytecode })).data
    expect(code).toBe(runtime)
    const nonceAfterFirst = await chain.getTransactionCount({ address: deployer })
    expect(nonceAfterFirst).toBe(1)

    const second = await cli({ DEPLOYER_PRIVATE_KEY: key }, "--rpc", rpcUrl)
    expect(second.stdout.trim()).toBe(`SETTLEMENT_BATCHER_ADDRESS=${address}`)
    expect(second.stderr).toContain("already deployed")
    expect(await chain.getTransactionCount({ address: deployer })).toBe(nonceAfterFirst)

    // Another operator with another key lands on the same address, and pays nothing for it.
    const other = generatePrivateKey()
    const again = await deployBatcher({ rpcUrl, privateKey: other })
    expect(again).toEqual({ address, chainId: await chain.getChainId(), transactionHash: undefined })
  }, 120_000)

  it("refuses a well-known dev key on a chain that is not a local anvil, and a missing key or RPC", async () => {
    const geth = await posingAsGeth()
    const devKey = DEV_PRIVATE_KEYS[5] ?? generatePrivateKey()
    await expect(deployBatcher({ rpcUrl: geth, privateKey: devKey })).rejects.toThrow(/well-known anvil dev key/)
    await expect(cli({ DEPLOYER_PRIVATE_KEY: devKey }, "--rpc", geth)).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/well-known anvil dev key/)
    })
    await expect(cli({}, "--rpc", rpcUrl)).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/DEPLOYER_PRIVATE_KEY/) })
    await expect(cli({ DEPLOYER_PRIVATE_KEY: generatePrivateKey() })).rejects.toMatchObject({ stderr: expect.stringMatching(/--rpc is required/) })
  }, 120_000)
})
