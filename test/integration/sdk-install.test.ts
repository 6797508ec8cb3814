// The SDK as a stranger installs it, following sdk/README.md: `npm run sdk:pack` makes the tarball, a new project in a
// temporary folder outside the repository installs it with its peers, type-checks with its own tsc and runs a per-token
// agent that reports usage and a paying client against a running service (test/fixtures/sdk-consumer/main.ts): the
// client disputes a call by `result.transactionId`, the owner withdraws; the chain agrees with every figure.
import { execFile } from "node:child_process"
import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { devAccount, devKey, usdcBalance } from "../support/clients.js"
import { sdkServer } from "../support/sdkServer.js"

const run = promisify(execFile)
const root = fileURLToPath(new URL("../..", import.meta.url))
/** The peers at the versions this repository tests with (npm's cache has them after `npm ci`: no download). */
const PEERS = ["viem", "@x402/fetch", "@x402/evm", "@x402/core", "ajv", "typescript", "@types/node"]
const versionOf = async (name: string) => (JSON.parse(await readFile(join(root, "node_modules", name, "package.json"), "utf8")) as { version: string }).version

const service = sdkServer()
let project = ""

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), "sdk-consumer-"))
})

afterAll(async () => {
  if (project !== "") await rm(project, { recursive: true, force: true })
})

describe("the SDK installed outside the repository", () => {
  it("packs, installs with its peers, type-checks, and runs a per-token agent paid by the SDK client; a dispute by result.transactionId and a withdrawal work", async () => {
    // 1. One command makes the tarball (sdk/README.md, "Install").
    await run("npm", ["run", "-s", "sdk:pack", "--", "--pack-destination", project], { cwd: root })
    const { version } = JSON.parse(await readFile(join(root, "sdk", "package.json"), "utf8")) as { version: string }
    const tarball = join(project, `agent-marketplace-sdk-${version}.tgz`)

    // 2. A new ESM project installs it with its peers, as the README says.
    await writeFile(join(project, "package.json"), JSON.stringify({ name: "sdk-consumer", private: true, type: "module" }))
    await writeFile(join(project, "tsconfig.json"), JSON.stringify({
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, outDir: "dist", types: ["node"], skipLibCheck: true }
    }))
    await copyFile(join(root, "test", "fixtures", "sdk-consumer", "main.ts"), join(project, "main.ts"))
    const peers = await Promise.all(PEERS.map(async (name) => `${name}@${await versionOf(name)}`))
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball, ...peers], { cwd: project, timeout: 240_000 })

    // 3. Its own tsc type-checks the project against the installed SDK's types (one viem: the peer), then builds it.
    await run(join(project, "node_modules", ".bin", "tsc"), ["-p", "."], { cwd: project })

    // 4. It runs against the service: dev account 6 owns the agent, dev account 7 pays.
    const owner = devAccount(6)
    const client = devAccount(7)
    const [ownerBefore, clientBefore] = await Promise.all([usdcBalance(owner.address), usdcBalance(client.address)])
    const { stdout } = await run(process.execPath, [join(project, "dist", "main.js")], {
      cwd: project,
      timeout: 90_000,
      env: { ...process.env, MARKETPLACE_URL: service.current().baseUrl, OWNER_KEY: devKey(6), CLIENT_KEY: devKey(7) }
    })
    const seen = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as {
      outputs: Array<{ words: number }>
      charged: Array<string>
      returned: Array<string>
      transactionIds: Array<string>
      dispute: { transactionId: string; status: string }
      withdrawal: { status: string; txHash: string; netAmount: string }
    }
    expect(seen.outputs).toEqual([{ words: 3 }, { words: 2 }])
    // 1,500 tokens at 1.00 per 1,000 plus the platform's 0.001; of the 2.001 authorised (2,000 tokens), 0.5 went back.
    expect(seen.charged).toEqual(["1.501000", "1.501000"])
    expect(seen.returned).toEqual(["0.500000", "0.500000"])
    expect(seen.transactionIds.every((id) => /^tx_/.test(id))).toBe(true)
    expect(seen.dispute).toMatchObject({ transactionId: seen.transactionIds[0], status: "open" })
    expect(seen.withdrawal).toMatchObject({ status: "completed", txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), netAmount: "0.900000" })
    // The chain agrees: the owner paid 0.10 to register and received 0.90; the client paid exactly its two charges.
    expect(await usdcBalance(owner.address)).toBe(ownerBefore - 100_000n + 900_000n)
    await expect.poll(() => usdcBalance(client.address), { timeout: 30_000 }).toBe(clientBefore - 2n * 1_501_000n)
  }, 420_000)
})
