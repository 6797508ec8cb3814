// Finding 1, defence in depth: `npm start` is a supervisor and its server. A server that dies hard (SIGKILL, as an OOM
// abort would) is started again by the supervisor on the same port with the same data, and what it had started (the
// embedded PostgreSQL, anvil, cluster workers) is stopped, never orphaned; a supervisor killed with SIGKILL takes
// everything down with it within seconds. Single process and WEB_CONCURRENCY=2, on the embedded defaults.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { createWalletClient, http, publicActions } from "viem"
import { beforeAll } from "vitest"
import { wrapFetchWithPayment } from "x402-fetch"
import { devnetChain } from "../../layers/devnet/anvil.js"
import { freePort } from "../../layers/embeddedPostgres.js"
import { call, devAccount } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { tempDataDir, untilProcesses } from "../support/processes.js"
import { childrenOf, ensureBundle, type ServerProcess, serverProcess, untilHealthy } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)

interface Proc {
  readonly pid: number
  readonly ppid: number
  readonly comm: string
  readonly args: string
}

/** Every live (not zombie) process, from /proc. */
const processes = (): Array<Proc> =>
  readdirSync("/proc").filter((e) => /^\d+$/.test(e)).flatMap((entry) => {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (state === "Z" || state === "X") return []
      const args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ")
      return [{ pid: Number(entry), ppid: Number(ppid), comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), args }]
    } catch {
      return []
    }
  })

/** `pid`'s live descendants. */
const treeOf = (pid: number): Array<Proc> => {
  const all = processes()
  const out: Array<Proc> = []
  const walk = (p: number) => {
    for (const child of all.filter((c) => c.ppid === p)) {
      out.push(child)
      walk(child.pid)
    }
  }
  walk(pid)
  return out
}

const stillRunning = (procs: ReadonlyArray<Proc>) => {
  const live = new Set(processes().map((p) => p.pid))
  return procs.filter((p) => live.has(p.pid))
}

const infrastructure = (procs: ReadonlyArray<Proc>) => procs.filter((p) => p.comm === "postgres" || p.comm === "anvil")

/** The anvil and postmaster processes anywhere on the machine that serve `dataDir` (orphans included). */
const servingDataDir = (dataDir: string) => processes().filter((p) => (p.comm === "anvil" || p.comm === "postgres") && p.args.includes(dataDir))

const tempDir = tempDataDir("marketplace-supervision-")

/** A paid registration on the service's own devnet (dev account 2 pays for its own wallet). */
const register = (server: ServerProcess, rpcUrl: string) =>
  Effect.promise(async () => {
    const wallet = createWalletClient({ account: devAccount(2), chain: devnetChain(rpcUrl), transport: http(rpcUrl) }).extend(publicActions)
    const pay = wrapFetchWithPayment(fetch, wallet as unknown as Parameters<typeof wrapFetchWithPayment>[1])
    const response = await pay(`${server.baseUrl}/api/v1/agents`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(registration(devAccount(2), { endpoints: { execution: "http://127.0.0.1:9/x" } }))
    })
    const body = (await response.json()) as { data?: { id?: string } }
    if (response.status !== 201 || body.data?.id === undefined) throw new Error(`registration failed: ${response.status} ${JSON.stringify(body)}`)
    return body.data.id
  })

/**
 * The service on the embedded defaults (its own PostgreSQL and anvil under a fresh DATA_DIR): its server is SIGKILLed
 * and must come back healthy, with the agent registered before; then its supervisor is SIGKILLed and nothing may stay.
 */
const killAndRecover = (extra: Record<string, string>) =>
  Effect.gen(function* () {
    const dataDir = yield* tempDir
    // Whatever still serves the directory when the test ends (only on failure) is killed with it.
    yield* Effect.addFinalizer(() => Effect.sync(() => servingDataDir(dataDir).forEach((p) => process.kill(p.pid, "SIGKILL"))))
    const devnetPort = yield* Effect.promise(freePort)
    const server = yield* serverProcess({ DATA_DIR: dataDir, DEVNET_PORT: String(devnetPort), ...extra })
    const supervisor = server.child.pid ?? 0
    const agentId = yield* register(server, `http://127.0.0.1:${devnetPort}`)
    // The supervisor counts a death as a crash (and starts the server again) only once the server said it serves; with
    // workers that is when all of them listen, which can be after /health already answers through the first one.
    const ready = extra["WEB_CONCURRENCY"] === undefined ? /agent marketplace listening on/ : /server workers listening on/
    yield* untilProcesses(Effect.sync(() => server.output()), (out) => ready.test(out), 30_000)

    // The server: the supervisor's node child (before the supervisor existed, the start script's process itself).
    const serverPid = () => childrenOf(supervisor).find((pid) => processes().some((p) => p.pid === pid && p.comm === "node")) ?? supervisor
    const first = serverPid()
    const before = treeOf(first)
    expect(infrastructure(before).filter((p) => p.comm === "anvil")).toHaveLength(1)
    expect(infrastructure(before).some((p) => p.comm === "postgres")).toBe(true)

    // kill -9 of the server alone (what an OOM abort does): the supervisor starts another on the same port.
    const killedAt = Date.now()
    process.kill(first, "SIGKILL")
    const second = yield* untilProcesses(Effect.sync(serverPid), (pid) => pid !== first && pid !== supervisor, 30_000)
    yield* untilHealthy(server, 90_000)
    const restartMs = Date.now() - killedAt
    console.log(`supervision (${JSON.stringify(extra)}): healthy again ${restartMs} ms after the server was killed`)

    // What the dead server started is gone, not orphaned (its workers notice the closed channel and exit; on a loaded
    // machine that can take a moment after the new server answers): the data directory is the new server's only.
    expect(yield* untilProcesses(Effect.sync(() => stillRunning(before)), (l) => l.length === 0, 15_000)).toEqual([])
    const after = treeOf(second)
    expect(infrastructure(after).filter((p) => p.comm === "anvil")).toHaveLength(1)
    const afterPids = new Set(after.map((p) => p.pid))
    expect(servingDataDir(dataDir).filter((p) => !afterPids.has(p.pid))).toEqual([])
    // Same data: the agent registered before the kill (PostgreSQL), and it still reads.
    const read = yield* Effect.promise(() => call(`${server.baseUrl}/api/v1/agents/${agentId}`, { signal: AbortSignal.timeout(30_000) }))
    expect(read.status).toBe(200)
    expect(read.body.data).toMatchObject({ id: agentId, name: "Summarizer" })

    // kill -9 of the supervisor: the server notices its channel close and stops everything it started.
    const everything = treeOf(supervisor)
    expect(everything.length).toBeGreaterThan(2)
    server.child.kill("SIGKILL")
    const left = yield* untilProcesses(Effect.sync(() => stillRunning(everything)), (l) => l.length === 0, 15_000)
    expect(left).toEqual([])
    expect(servingDataDir(dataDir)).toEqual([])
  })

describe("npm start supervises its server", () => {
  it.scopedLive("one process: a server killed with SIGKILL is back on its port with its data, nothing of it orphaned; a killed supervisor leaves nothing", () =>
    killAndRecover({}), { timeout: 240_000 })

  it.scopedLive("WEB_CONCURRENCY=2: a primary killed with SIGKILL takes its workers, PostgreSQL and anvil with it and is started again; a killed supervisor leaves nothing", () =>
    killAndRecover({ WEB_CONCURRENCY: "2" }), { timeout: 240_000 })
})
