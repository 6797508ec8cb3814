// The real entry point (package.json "start") as a user runs it: every start-up failure is one message and exit code 1,
// SIGTERM stops everything within 5 s, and a restart (also after kill -9) finds the data intact with nothing orphaned.
import { type ChildProcess, spawn } from "node:child_process"
import { access, chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { readFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { createPublicClient, createWalletClient, http, publicActions } from "viem"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { wrapFetchWithPayment } from "x402-fetch"
import { devnetChain } from "../../layers/devnet/anvil.js"
import { resolveAnvilBinary } from "../../layers/devnet/process.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { freePort } from "../../layers/embeddedPostgres.js"
import { call, devAccount, TREASURY } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { childrenOf } from "../support/servers.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

/** `npm start` without npm: package.json's start script, its first word resolved like npm does. */
const startCommand = (): { readonly command: string; readonly args: ReadonlyArray<string> } => {
  const pkg: unknown = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
  const script =
    typeof pkg === "object" && pkg !== null && "scripts" in pkg && typeof pkg.scripts === "object" && pkg.scripts !== null && "start" in pkg.scripts
      ? String(pkg.scripts.start)
      : "tsx src/main.ts"
  const [bin = "node", ...args] = script.trim().split(/\s+/)
  return { command: bin === "node" ? process.execPath : join(root, "node_modules", ".bin", bin), args }
}

/** Settings a developer's shell might carry into the tests: each test states its own. */
const SETTINGS = [
  "PORT", "HOST", "DATA_DIR", "DATABASE_URL", "CHAIN_RPC_URL", "DEVNET_RPC_URL", "DEVNET_PORT", "USDC_ADDRESS",
  "TREASURY_PRIVATE_KEY", "TREASURY_ADDRESS", "FACILITATOR_URL", "OPERATOR_TOKEN", "X402_NETWORK", "PUBLIC_BASE_URL"
]
const inheritedEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !SETTINGS.includes(name)))

interface Service {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

const running = new Set<ChildProcess>()
afterAll(() => {
  for (const child of running) child.kill("SIGKILL")
})

const launch = (port: number, env: Record<string, string>): Service => {
  const { command, args } = startCommand()
  const child = spawn(command, args, { cwd: root, env: { ...inheritedEnv, PORT: String(port), ...env }, stdio: ["ignore", "pipe", "pipe"] })
  running.add(child)
  let out = ""
  let err = ""
  child.stdout?.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
  child.stderr?.on("data", (chunk: Buffer) => (err += chunk.toString("utf8")))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      running.delete(child)
      resolve({ code, signal })
    })
  )
  return { child, baseUrl: `http://127.0.0.1:${port}`, stdout: () => out, stderr: () => err, exited }
}

const within = <A>(promise: Promise<A>, ms: number, what: string): Promise<A> => {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** Polls /health until it answers "ok"; fails at once if the service exits. */
const healthy = (service: Service, timeoutMs = 60_000): Promise<void> => {
  let exited = false
  let last = "no answer"
  void service.exited.then(() => (exited = true))
  return within(
    (async () => {
      for (;;) {
        if (exited) throw new Error(`the service exited before it was healthy:\n${service.stderr()}`)
        const status = await fetch(`${service.baseUrl}/health`, { signal: AbortSignal.timeout(2_000) })
          .then(async (r) => {
            const body = await r.text()
            last = `${r.status} ${body.slice(0, 500)}`
            return r.ok ? (JSON.parse(body) as { data?: { status?: string } }).data?.status : undefined
          })
          .catch(() => undefined)
        if (status === "ok") return
        await new Promise((r) => setTimeout(r, 50))
      }
    })(),
    timeoutMs,
    "healthy"
  ).catch((error: unknown) => {
    // Say why: the last /health answer and what the service printed.
    throw new Error(`${String(error)}; last /health: ${last}\nstdout:\n${service.stdout().slice(-3_000)}\nstderr:\n${service.stderr().slice(-3_000)}`)
  })
}

/** Starts the service expecting it to fail: exit code 1 and one message, no stack trace. */
const failsToStart = async (env: Record<string, string>, timeoutMs = 30_000) => {
  const service = launch(await freePort(), env)
  const { code } = await within(service.exited, timeoutMs, "exit")
  const lines = service.stderr().trim().split("\n")
  const message = lines.find((line) => line.startsWith("agent marketplace could not start: ")) ?? service.stderr()
  expect(code).toBe(1)
  expect(service.stderr()).not.toMatch(/^\s+at /m)
  return message
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  const stat = (() => {
    try {
      return readFileSync(`/proc/${pid}/stat`, "utf8")
    } catch {
      return ""
    }
  })()
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
}

const gone = (pids: ReadonlyArray<number>) =>
  within(
    (async () => {
      while (pids.some(alive)) await new Promise((r) => setTimeout(r, 25))
    })(),
    3_000,
    `processes ${pids.join(", ")} still running`
  )

/** Live processes whose command line names `dir` (postgres -D, anvil --dump-state). */
const processesUsing = async (dir: string): Promise<Array<number>> => {
  const pids = (await readdir("/proc")).filter((entry) => /^\d+$/.test(entry)).map(Number)
  const using: Array<number> = []
  for (const pid of pids) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
    if (cmdline.includes(dir) && alive(pid)) using.push(pid)
  }
  return using
}

// The first start after a source change builds the bundle (see src/tools/build.mjs): once, before the timed tests.
beforeAll(async () => {
  const warmUp = launch(await freePort(), { CHAIN_RPC_URL: "http://127.0.0.1:1" })
  await within(warmUp.exited, 120_000, "the first start (build)")
}, 130_000)

const tempDataDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), "marketplace-startup-"))
  await chmod(dir, 0o755) // the postgres system user (when run as root) reaches it in place
  return dir
}
const dirs: Array<string> = []
afterAll(() => Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true }))))

/** A port something else listens on, for as long as the test needs it. */
const occupiedPort = async (): Promise<{ readonly port: number; readonly close: () => Promise<void> }> => {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (typeof address !== "object" || address === null) throw new Error("no port")
  return { port: address.port, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

const adminUrl = () => inject("pgAdminUrl")
const freshDatabaseUrl = async () => {
  const name = `startup_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
  const admin = new pg.Client(adminUrl())
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name} TEMPLATE ${inject("pgTemplate")}`)
  await admin.end()
  return adminUrl().replace(/\/postgres$/, `/${name}`)
}

/** Settings of a real chain (CHAIN_RPC_URL) apart from the URL itself. */
const rpcSettings = {
  USDC_ADDRESS: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  TREASURY_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  OPERATOR_TOKEN: "startup-test-operator-token-Hb3nW8qZ5rT1yK6v",
  CLIENT_ID_SECRET: "startup-test-client-id-secret-0123456789",
  WEBHOOK_SECRET_KEY: "ab".repeat(32),
  CHAIN_TOKEN_SECRET: "startup-test-chain-token-secret-0123456789"
}

/** anvil with its default chain id 31337: a chain that is not the one the service is configured for. */
const otherChain = async (): Promise<{ readonly rpcUrl: string; readonly stop: () => void }> => {
  const port = await freePort()
  const child = spawn(resolveAnvilBinary(), ["--port", String(port), "--host", "127.0.0.1"], { stdio: "ignore" })
  running.add(child)
  const rpcUrl = `http://127.0.0.1:${port}`
  await within(
    (async () => {
      for (;;) {
        const ok = await fetch(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_chainId\",\"params\":[]}" })
          .then((r) => r.ok, () => false)
        if (ok) return
        await new Promise((r) => setTimeout(r, 25))
      }
    })(),
    10_000,
    "anvil 31337"
  )
  return { rpcUrl, stop: () => child.kill("SIGKILL") }
}

describe.concurrent("a start-up failure is one message and exit code 1", () => {
  it.skipIf(process.platform !== "linux")("DATA_DIR not writable (under /proc, where Node's recursive mkdir used to spin forever)", async () => {
    const started = Date.now()
    expect(await failsToStart({ DATA_DIR: "/proc/nope/data" })).toMatch(
      /^agent marketplace could not start: DATA_DIR \/proc\/nope\/data is not usable: cannot create \/proc\/nope .*Choose a writable DATA_DIR\.$/
    )
    expect(Date.now() - started).toBeLessThan(20_000)
  })

  it("missing settings outside devnet", async () => {
    expect(await failsToStart({ DATA_DIR: "/nonexistent", CHAIN_RPC_URL: "http://127.0.0.1:1" })).toBe(
      "agent marketplace could not start: configuration: CHAIN_RPC_URL is set, so these settings are required: USDC_ADDRESS, TREASURY_PRIVATE_KEY, OPERATOR_TOKEN, CLIENT_ID_SECRET, WEBHOOK_SECRET_KEY, CHAIN_TOKEN_SECRET"
    )
  })

  it("a weak OPERATOR_TOKEN outside devnet is refused at start with one line", async () => {
    expect(await failsToStart({ DATA_DIR: "/nonexistent", CHAIN_RPC_URL: "http://127.0.0.1:1", ...rpcSettings, OPERATOR_TOKEN: "operator-token-2026-operator-token" })).toBe(
      "agent marketplace could not start: configuration: OPERATOR_TOKEN is too weak outside the devnet: it needs 32 to 1024 characters and about 128 bits of entropy (this one has 34 characters, about 74 bits); generate one with: openssl rand -base64 32"
    )
    expect(await failsToStart({ DATA_DIR: "/nonexistent", CHAIN_RPC_URL: "http://127.0.0.1:1", ...rpcSettings, OPERATOR_TOKEN: "startup-short-token" })).toMatch(
      /^agent marketplace could not start: configuration: OPERATOR_TOKEN is too weak outside the devnet: .*\(this one has 19 characters, about \d+ bits\); generate one with: openssl rand -base64 32$/
    )
  })

  it("DATABASE_URL unreachable", async () => {
    const closed = await freePort()
    const message = await failsToStart({
      DATA_DIR: "/nonexistent",
      DATABASE_URL: `postgres://marketplace:secret@127.0.0.1:${closed}/marketplace`,
      DEVNET_RPC_URL: inject("rpcUrl")
    })
    expect(message).toMatch(/^agent marketplace could not start: the database \(DATABASE_URL\) is not usable: .*ECONNREFUSED/)
    expect(message).not.toContain("secret")
  })

  it("DATABASE_URL with a wrong password", async () => {
    const url = new URL(adminUrl())
    url.password = "wrong-password"
    const message = await failsToStart({ DATA_DIR: "/nonexistent", DATABASE_URL: url.toString(), DEVNET_RPC_URL: inject("rpcUrl") })
    expect(message).toMatch(/^agent marketplace could not start: the database \(DATABASE_URL\) is not usable: .*password authentication failed/)
    expect(message).not.toContain("wrong-password")
  })

  it("CHAIN_RPC_URL unreachable", async () => {
    const closed = await freePort()
    const message = await failsToStart({ DATA_DIR: "/nonexistent", DATABASE_URL: await freshDatabaseUrl(), CHAIN_RPC_URL: `http://127.0.0.1:${closed}`, ...rpcSettings })
    expect(message).toMatch(new RegExp(`^agent marketplace could not start: chain RPC http://127.0.0.1:${closed} did not answer`))
  })

  it("CHAIN_RPC_URL on the wrong chain", async () => {
    const chain = await otherChain()
    try {
      const databaseUrl = await freshDatabaseUrl()
      const unknown = await failsToStart({ DATA_DIR: "/nonexistent", DATABASE_URL: databaseUrl, CHAIN_RPC_URL: chain.rpcUrl, ...rpcSettings })
      expect(unknown).toBe(
        `agent marketplace could not start: chain RPC ${chain.rpcUrl} serves chain id 31337, which has no x402 v1 network name: use a supported chain or set X402_NETWORK`
      )
      const mismatch = await failsToStart({ DATA_DIR: "/nonexistent", DATABASE_URL: databaseUrl, CHAIN_RPC_URL: chain.rpcUrl, X402_NETWORK: "base-sepolia", ...rpcSettings })
      expect(mismatch).toBe(
        `agent marketplace could not start: chain RPC ${chain.rpcUrl} serves chain id 31337, but x402 network "base-sepolia" is chain id 84532: wrong chain`
      )
    } finally {
      chain.stop()
    }
  })
})

describe.skipIf(process.platform !== "linux")("the embedded defaults, started, stopped and killed on one DATA_DIR", () => {
  let dataDir = ""
  let agentId = ""

  const pidsOf = async (service: Service) => {
    const pgDir = /database:\s+embedded \(data in (.+)\)/.exec(service.stdout())?.[1]
    if (pgDir === undefined) throw new Error(`no database directory in the banner:\n${service.stdout()}`)
    const postgres = Number((await readFile(join(pgDir, "postmaster.pid"), "utf8")).split("\n")[0])
    const anvil = Number((JSON.parse(await readFile(join(dataDir, "devnet", "anvil.pid"), "utf8")) as { pid: number }).pid)
    expect(alive(postgres) && alive(anvil)).toBe(true)
    return { postgres, anvil }
  }
  const rpcUrlOf = (service: Service) => {
    const rpcUrl = /chain RPC:\s+(\S+)/.exec(service.stdout())?.[1]
    if (rpcUrl === undefined) throw new Error(`no chain RPC in the banner:\n${service.stdout()}`)
    return rpcUrl
  }
  const treasuryUsdc = (rpcUrl: string) =>
    createPublicClient({ chain: devnetChain(rpcUrl), transport: http(rpcUrl) }).readContract({
      address: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [TREASURY]
    })
  const stop = async (service: Service) => {
    const started = Date.now()
    service.child.kill("SIGTERM")
    const { code, signal } = await within(service.exited, 5_000, "SIGTERM")
    expect(Date.now() - started).toBeLessThan(5_000)
    return { code, signal }
  }

  it("PORT in use: one message, exit code 1, no postgres or anvil left behind", async () => {
    dataDir = await tempDataDir()
    dirs.push(dataDir)
    const taken = await occupiedPort()
    try {
      const service = launch(taken.port, { DATA_DIR: dataDir, DEVNET_PORT: "0" })
      const { code } = await within(service.exited, 60_000, "exit")
      expect(code).toBe(1)
      expect(service.stderr().trim()).toBe(
        `agent marketplace could not start: port ${taken.port} is already in use: stop the other process or choose another PORT`
      )
      expect(await processesUsing(dataDir)).toEqual([])
    } finally {
      await taken.close()
    }
  })

  it("DEVNET_PORT taken: starts on a free port and prints it; SIGTERM stops everything within 5 s", async () => {
    const taken = await occupiedPort()
    try {
      const service = launch(await freePort(), { DATA_DIR: dataDir, DEVNET_PORT: String(taken.port) })
      await healthy(service)
      const rpcUrl = rpcUrlOf(service)
      expect(rpcUrl).not.toBe(`http://127.0.0.1:${taken.port}`)
      expect(service.stderr()).toContain(`devnet: port ${taken.port} is in use by another process; anvil listens on ${rpcUrl} instead`)

      // Something to find after the restart: an agent (database) paid for with 0.10 USDC (chain).
      const wallet = createWalletClient({ account: devAccount(2), chain: devnetChain(rpcUrl), transport: http(rpcUrl) }).extend(publicActions)
      const pay = wrapFetchWithPayment(fetch, wallet as unknown as Parameters<typeof wrapFetchWithPayment>[1])
      const response = await pay(`${service.baseUrl}/api/v1/agents`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(registration(devAccount(2)))
      })
      expect(response.status).toBe(201)
      agentId = ((await response.json()) as { data: { id: string } }).data.id
      expect(await treasuryUsdc(rpcUrl)).toBe(100_000n)

      const pids = await pidsOf(service)
      expect(await stop(service)).toEqual({ code: 0, signal: null })
      expect(service.stderr()).not.toContain("could not start")
      await gone([pids.postgres, pids.anvil])
    } finally {
      await taken.close()
    }
  })

  it("a second start finds the agent and the chain state; after kill -9 the next start stops the orphans", async () => {
    expect(agentId).not.toBe("")
    const second = launch(await freePort(), { DATA_DIR: dataDir, DEVNET_PORT: "0" })
    await healthy(second, 30_000)
    expect((await call(`${second.baseUrl}/api/v1/agents/${agentId}`)).status).toBe(200)
    expect(await treasuryUsdc(rpcUrlOf(second))).toBe(100_000n)

    // kill -9 of the supervisor and its server at once (as the kernel's OOM killer could): nothing runs the service's
    // finalizers and no supervisor stops the server's group; postgres and anvil are orphaned. (Either one killed alone
    // leaves nothing behind: test/integration/supervision.test.ts.)
    const orphans = await pidsOf(second)
    const supervisor = second.child.pid ?? 0
    const server = childrenOf(supervisor)
    process.kill(supervisor, "SIGSTOP")
    for (const pid of server) process.kill(pid, "SIGKILL")
    second.child.kill("SIGKILL")
    await second.exited
    expect(alive(orphans.postgres) && alive(orphans.anvil)).toBe(true)

    const third = launch(await freePort(), { DATA_DIR: dataDir, DEVNET_PORT: "0" })
    try {
      await healthy(third, 30_000)
      await gone([orphans.postgres, orphans.anvil])
      expect((await call(`${third.baseUrl}/api/v1/agents/${agentId}`)).status).toBe(200)
      expect(await treasuryUsdc(rpcUrlOf(third))).toBe(100_000n)
      const pids = await pidsOf(third)
      await stop(third)
      await gone([pids.postgres, pids.anvil])
      expect(await processesUsing(dataDir)).toEqual([])
    } finally {
      third.child.kill("SIGKILL")
    }
  })
})

describe.skipIf(process.platform !== "linux" || process.getuid?.() !== 0)("as root, DATA_DIR where the postgres user cannot reach it", () => {
  it("starting over (stop, delete DATA_DIR, start) gives a new database with the new devnet chain, though the cluster lives in /var/tmp", async () => {
    const home = await mkdtemp(join(tmpdir(), "marketplace-root-home-"))
    dirs.push(home)
    await chmod(home, 0o700)
    const dataDir = join(home, ".data")
    const clusterOf = (service: Service) => {
      const dir = /database:\s+embedded \(data in (.+)\)/.exec(service.stdout())?.[1]
      if (dir === undefined) throw new Error(`no database directory in the banner:\n${service.stdout()}`)
      return dir
    }
    const first = launch(await freePort(), { DATA_DIR: dataDir, DEVNET_PORT: "0" })
    await healthy(first)
    const cluster = clusterOf(first)
    dirs.push(dirname(cluster))
    expect(cluster.startsWith(dataDir)).toBe(false)
    first.child.kill("SIGTERM")
    await within(first.exited, 10_000, "SIGTERM")
    // Something only the first database has.
    await writeFile(join(cluster, "from-the-first-start"), "")

    await rm(dataDir, { recursive: true, force: true })
    const again = launch(await freePort(), { DATA_DIR: dataDir, DEVNET_PORT: "0" })
    try {
      await healthy(again)
      expect(clusterOf(again)).toBe(cluster)
      expect(await access(join(cluster, "from-the-first-start")).then(() => true, () => false)).toBe(false)
      expect(again.stderr()).not.toContain("belongs to another chain")
      again.child.kill("SIGTERM")
      await within(again.exited, 10_000, "SIGTERM")
    } finally {
      again.child.kill("SIGKILL")
    }
  }, 120_000)
})
