// Issue 26 item 5, a whole-host crash on a chain that keeps going: the service (supervisor, server, its embedded
// PostgreSQL) is killed with SIGKILL while 32 paid calls are in flight on a devnet that survives and mines a block a
// second, and the node loses its pool with it (the settlements the dead process had broadcast are gone). Started again
// on the same data: /health is ok (never degraded) as soon as it answers, calls sent right after answer in their usual
// time (not behind the lost nonces until their 30 s leases run out), every payer pays exactly for the calls that
// completed, and the reconciliation reads zero drift.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import pg from "pg"
import { createTestClient, http } from "viem"
import { beforeAll, inject } from "vitest"
import { devnetChain } from "../../layers/devnet/anvil.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, usdcBalance } from "../support/clients.js"
import { embeddedDatabase, PROCESS_OPERATOR_TOKEN, postgresServing, registerAgentAt, tempDataDir, UNFINISHED, untilProcesses } from "../support/processes.js"
import { ensureBundle, killHard, type ServerProcess, serverProcess } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)


const timedCall = (server: ServerProcess, payer: ReturnType<typeof devAccount>, agentId: string, text: string) =>
  Effect.promise(async () => {
    const started = Date.now()
    const result = await paidCall(payer, `${server.baseUrl}/api/v1/execute`, { json: { targetAgentId: agentId, capabilityId: "echo", input: { text } } })
    return { status: result.status, ms: Date.now() - started }
  })

describe("a whole-host crash on a chain that keeps going", () => {
  it.scopedLive("kill -9 of the service with 32 paid calls in flight and the node's pool lost: after a restart on the same data, calls answer in their usual time, /health is ok at once, every payer pays for completed calls only, drift 0", () =>
    Effect.gen(function* () {
      const rpcUrl = inject("rpcUrl")
      const anvil = createTestClient({ mode: "anvil", chain: devnetChain(rpcUrl), transport: http(rpcUrl) })
      // A chain that keeps going: a block every second, whatever the service does (automine again afterwards).
      yield* Effect.acquireRelease(
        Effect.promise(async () => {
          await anvil.setAutomine(false)
          await anvil.setIntervalMining({ interval: 1 })
        }),
        () => Effect.promise(async () => {
          await anvil.setIntervalMining({ interval: 0 })
          await anvil.setAutomine(true)
        })
      )
      const dataDir = yield* tempDataDir("marketplace-crash-")
      yield* Effect.addFinalizer(() => Effect.sync(() => postgresServing(dataDir).forEach((pid) => process.kill(pid, "SIGKILL"))))
      // Its own embedded PostgreSQL (no DATABASE_URL): it dies with the host.
      const env = {
        DATA_DIR: dataDir, DEVNET_RPC_URL: rpcUrl, OPERATOR_TOKEN: PROCESS_OPERATOR_TOKEN,
        EXECUTION_TIMEOUT_MS: "3000", EXECUTION_RETRY_WINDOW_SECONDS: "1", RATE_LIMIT_CLIENT_PER_WINDOW: "10000"
      }
      const first = yield* serverProcess(env)
      const agent = yield* fakeAgent({ kind: "delay", ms: 300, then: "echo" })
      const agentId = yield* registerAgentAt(first, devAccount(1), agent.url)
      const payers = [2, 3, 4, 5, 6, 7, 8, 9].map(devAccount)
      const before = yield* Effect.promise(() => Promise.all(payers.map((p) => usdcBalance(p.address))))

      // 32 closed loops (four per payer) until the host dies under them.
      let stop = false
      const usual: Array<number> = []
      const loops = Array.from({ length: 32 }, async (_, i) => {
        const payer = payers[i % payers.length]!
        for (let n = 0; !stop; n++) {
          const started = Date.now()
          const result = await paidCall(payer, `${first.baseUrl}/api/v1/execute`, { json: { targetAgentId: agentId, capabilityId: "echo", input: { text: `load ${i}-${n}` } } })
            .catch(() => undefined)
          if (result?.status === 200 && !stop) usual.push(Date.now() - started)
        }
      })
      yield* untilProcesses(Effect.sync(() => usual.length), (n) => n >= 48, 90_000)
      // The node holds settlements the service broadcast and has not mined yet: they are lost with the host.
      const pool = yield* untilProcesses(Effect.promise(() => anvil.getTxpoolStatus()), (p) => p.pending > 0, 10_000)
      stop = true
      expect(yield* killHard(first)).toMatchObject({ signal: "SIGKILL" })
      yield* Effect.promise(() => fetch(rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_dropAllTransactions", params: [] })
      }).then((r) => r.json()))
      yield* Effect.promise(() => Promise.all(loops))
      const median = [...usual].sort((a, b) => a - b)[Math.floor(usual.length / 2)]!
      console.log(`crash-restart: ${usual.length} calls answered before the kill (median ${median} ms), ${pool.pending} pending + ${pool.queued} queued in the node's pool at the kill`)

      // The same data, the same chain: healthy, and never "degraded" on the way (money in flight is not drift).
      const restartedAt = Date.now()
      const second = yield* serverProcess(env)
      const startMs = Date.now() - restartedAt
      expect(second.healthSeen.filter((s) => s !== "ok")).toEqual([])
      // The start sent again what the dead process had not seen mined (one line, with its count and time).
      const resent = /treasury at start(?: \([^)]*\))?: (\d+) of (\d+) unfinished transactions[^\n]*/.exec(second.output())
      console.log(`crash-restart: ${resent?.[0] ?? "no treasury line at start"}`)
      expect(Number(resent?.[2] ?? 0)).toBeGreaterThan(0)
      const db = yield* embeddedDatabase(dataDir)
      const query = <R extends pg.QueryResultRow>(text: string, values: ReadonlyArray<unknown> = []) =>
        Effect.promise(() => db.query<R>(text, [...values]).then((r) => r.rows))
      const [atRestart] = yield* query<{ n: number }>(UNFINISHED)

      // Calls sent right after the restart answer in their usual time, not after the 30 s leases (or 60 s receipt waits).
      const after = yield* Effect.all(payers.map((payer, i) => timedCall(second, payer, agentId, `after ${i}`)), { concurrency: "unbounded" })
      console.log(`crash-restart: healthy ${startMs} ms after the restart with ${atRestart!.n} unfinished rows; calls right after answered in ${after.map((a) => a.ms).join(", ")} ms`)
      expect(after.map((a) => a.status)).toEqual(payers.map(() => 200))
      expect(Math.max(...after.map((a) => a.ms))).toBeLessThan(Math.max(8_000, 4 * median))

      // Everything the crash cut off finishes: settled and completed, or failed and refunded.
      yield* untilProcesses(Effect.map(query<{ n: number }>(UNFINISHED), (rows) => rows[0]!.n), (n) => n === 0, 150_000)
      // Each payer paid exactly for its completed calls (settled payments of completed executions), nothing else.
      const balances = yield* Effect.promise(() => Promise.all(payers.map((p) => usdcBalance(p.address))))
      const owed = yield* query<{ payer: string; amount: string }>(
        `SELECT p.payer, sum(p.amount)::text AS amount FROM executions e JOIN payments p ON p.id = e.payment_id
          WHERE e.status = 'completed' AND p.status = 'settled' GROUP BY p.payer`)
      payers.forEach((p, i) => {
        const completed = BigInt(owed.find((r) => r.payer.toLowerCase() === p.address.toLowerCase())?.amount ?? "0")
        expect((before[i] ?? 0n) - (balances[i] ?? 0n)).toBe(completed)
      })
      // The reconciliation: zero drift, nothing in flight; /health ok.
      const reconciled = yield* untilProcesses(
        Effect.promise(() => call(`${second.baseUrl}/api/v1/operator/treasury/reconciliation`, { headers: { authorization: `Bearer ${PROCESS_OPERATOR_TOKEN}` } })),
        (r) => r.status === 200 && r.body.data?.current?.inFlightIncoming === "0" && r.body.data?.current?.inFlightOutgoing === "0",
        60_000
      )
      expect(reconciled.body.data.current).toMatchObject({ drift: "0" })
      expect((yield* Effect.promise(() => call(`${second.baseUrl}/health`))).body.data.status).toBe("ok")
    }), { timeout: 420_000 })
})
