// `npm run demo`: starts the marketplace on its devnet (a fresh data directory, free ports, earnings held 2 s, not 24 h),
// runs the SDK demo against it (flow.ts), prints the money table, and stops everything it started.
import { type ChildProcess, spawn } from "node:child_process"
import { chmod, mkdtemp, rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { MarketplaceError } from "@agent-marketplace/sdk"
import { mnemonicToAccount } from "viem/accounts"
import { moneyTable, runDemo } from "./flow.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const started = Date.now()
const log = (line: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${line}`)
/** anvil's public dev mnemonic: the devnet funds accounts 1-9 with 10,000 test USDC each. */
const devAccount = (i: number) => mnemonicToAccount("test test test test test test test test test test test junk", { addressIndex: i })

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** The devnet's earnings hold for the demo: seconds instead of a new agent's 24 h, so the owner can withdraw at once. */
const HOLD_SECONDS = 2

const healthy = async (baseUrl: string, service: ChildProcess, output: () => string) => {
  const deadline = Date.now() + 45_000
  let said = Date.now()
  for (;;) {
    if (Date.now() - said > 4_000) {
      log("  still starting: bundling the service on a first run, then PostgreSQL, migrations, anvil and test USDC")
      said = Date.now()
    }
    if (service.exitCode !== null || service.signalCode !== null) throw new Error(`the service exited:\n${output()}`)
    if (Date.now() > deadline) throw new Error(`the service was not healthy within 45 s:\n${output()}`)
    const status = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) })
      .then(async (r) => (r.ok ? ((await r.json()) as { data: { status: string } }).data.status : undefined))
      .catch(() => undefined)
    if (status === "ok") return
    await new Promise((r) => setTimeout(r, 100))
  }
}

const main = async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "marketplace-demo-"))
  await chmod(dataDir, 0o755) // the embedded PostgreSQL's system user must reach its directory when run as root
  const [port, devnetPort] = [await freePort(), await freePort()]
  const operatorToken = `demo-operator-${Math.random().toString(36).slice(2)}-token`
  const baseUrl = `http://127.0.0.1:${port}`
  log(`starting the marketplace on its devnet (${baseUrl}, data in ${dataDir})`)
  let output = ""
  const service = spawn(process.execPath, ["src/tools/start.mjs"], {
    cwd: root,
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      PORT: String(port),
      DEVNET_PORT: String(devnetPort),
      DATA_DIR: dataDir,
      OPERATOR_TOKEN: operatorToken,
      DEVNET_HOLD_SECONDS: String(HOLD_SECONDS),
      LOG_LEVEL: "warn"
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  service.stdout?.on("data", (c: Buffer) => (output += c.toString("utf8")))
  service.stderr?.on("data", (c: Buffer) => (output += c.toString("utf8")))
  const exited = new Promise<void>((resolve) => service.once("exit", () => resolve()))
  const stop = async () => {
    if (service.exitCode === null && service.signalCode === null) {
      service.kill("SIGTERM")
      const killed = setTimeout(() => service.kill("SIGKILL"), 15_000)
      await exited
      clearTimeout(killed)
    }
    await rm(dataDir, { recursive: true, force: true })
  }
  const interrupted = () => void stop().then(() => process.exit(130))
  process.once("SIGINT", interrupted)
  process.once("SIGTERM", interrupted)
  try {
    await healthy(baseUrl, service, () => output)
    log("the service is healthy (PostgreSQL, migrations, anvil with test USDC)")
    const result = await runDemo({
      baseUrl,
      rpcUrl: `http://127.0.0.1:${devnetPort}`,
      operatorToken,
      summariserOwner: devAccount(1),
      translatorOwner: devAccount(2),
      client: devAccount(3),
      holdSeconds: HOLD_SECONDS,
      log
    })
    console.log("")
    for (const line of moneyTable(result)) console.log(line)
    console.log("")
    const balanced = result.rows.every((r) => r.expected === r.onChain) && result.drift === 0n
    log(balanced ? "every figure matches the chain; reconciliation at zero drift" : "MISMATCH between the service and the chain")
    process.exitCode = balanced ? 0 : 1
  } catch (error) {
    console.error(error instanceof MarketplaceError ? `${error.code}: ${error.message} ${JSON.stringify(error.details ?? {})}` : error)
    process.exitCode = 1
  } finally {
    log("stopping the service, its PostgreSQL and anvil")
    await stop()
    log("done")
  }
}

await main()
