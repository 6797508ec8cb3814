// Two instances on one database (two lease keepers with their own instance ids over the real services): the treasury's
// reconciliation runs in exactly one, which logs a confirmed drift once; when it stops, the other takes over at its next
// attempt; a holder that dies (no release) loses the lease only once it expires. Driven by the TestClock; the lease's
// expiry is the database's clock, so "the TTL passed" is the row's expires_at moved into the past.
import { expect, layer } from "@effect/vitest"
import { Clock, Effect, Exit, Layer, Option, Scope, TestClock } from "effect"
import { inject } from "vitest"
import { Instance } from "../../layers/cluster/Instance.js"
import { Leases } from "../../layers/cluster/Leases.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { RECONCILIATION_LEASE, ReconciliationWorkerLive } from "../../services/treasury/Reconciliation.js"
import { devAccount, TREASURY, walletFor } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { recordingLogs } from "../support/logs.js"

/** Our clock starts at the real time, then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const pause = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

/** Polls a fact with a real-time deadline (statements and the chain answer in real time). */
const until = <A, E, R>(what: string, probe: Effect.Effect<A, E, R>, done: (a: A) => boolean, ms = 15_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    for (;;) {
      const value = yield* probe
      if (done(value)) return value
      if (Date.now() > deadline) return yield* Effect.dieMessage(`timed out waiting for ${what} (last: ${String(value)})`)
      yield* pause(25)
    }
  })

/** The leases of an instance named `id` (its own keeper, on the app's database). */
const leasesOf = (id: string) => Layer.fresh(Leases.DefaultWithoutDependencies).pipe(Layer.provide(Layer.succeed(Instance, Instance.make({ id }))))

/** Starts an instance's reconciliation worker in a scope of its own: closing it stops that instance. */
const startInstance = (id: string) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(Layer.provideMerge(Layer.fresh(ReconciliationWorkerLive), leasesOf(id)), scope)
    return { scope, leases: Layer.succeedContext(context) }
  })

/** A pass found a drift and waits (20 s on the TestClock) to check the same block again. */
const recheckScheduled = until(
  "the drift's re-check to be scheduled",
  Effect.all([TestClock.sleeps(), Clock.currentTimeMillis]),
  ([sleeps, now]) => [...sleeps].some((t) => t - now >= 10_000)
)

const holder = Effect.flatMap(Leases, (l) => l.holderOf(RECONCILIATION_LEASE))

/** Money the ledger does not explain: USDC sent straight to the treasury. */
const sendToTreasury = (amount: bigint) =>
  Effect.promise(async () => {
    const wallet = walletFor(devAccount(7))
    const hash = await wallet.writeContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "transfer", args: [TREASURY, amount] })
    await wallet.waitForTransactionReceipt({ hash })
  })

layer(TestApp({ BACKGROUND_WORKERS: "false", LOG_FORMAT: "json", LOG_LEVEL: "info", LEASE_TTL_MS: "15000" }))("background work once per cluster", (it) => {
  it.scoped("two instances: one reconciles and logs a drift once; when it stops, the other takes over at its next attempt", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const logs = yield* recordingLogs
      const a = yield* startInstance("host-a")
      const b = yield* startInstance("host-b")
      expect(yield* holder).toEqual(Option.some("host-a"))
      // Each keeper said what it holds: only host-a took the lease.
      expect(logs.find("lease.taken").map((r) => r["instance"])).toEqual(["host-a"])

      // host-a's first pass (at taking the lease) found no drift.
      const checks = sql<{ n: number; confirmed: number }>`SELECT count(*)::int AS n, count(*) FILTER (WHERE confirmed)::int AS confirmed
                                                          FROM treasury_reconciliations WHERE kind = 'check'`.pipe(Effect.orDie, Effect.map((r) => r[0]!))
      yield* until("host-a's first check", checks, (c) => c.n === 1)

      yield* sendToTreasury(1_234n)
      // The next pass (30 s later) sees the drift, re-checks the same block 20 s later and confirms it.
      yield* TestClock.adjust("30 seconds")
      yield* recheckScheduled
      yield* TestClock.adjust("20 seconds")
      yield* until("the confirmed drift", checks, (c) => c.confirmed === 1)
      const drifts = () => logs.find("treasury.drift")
      yield* until("the drift's log line", Effect.sync(drifts), (d) => d.length >= 1)
      yield* pause(200) // the other instance would log within the same pass
      expect(drifts()).toHaveLength(1)
      expect(drifts()[0]).toMatchObject({ level: "error", driftMicroUsdc: "1234" })
      // One pass ran per 30 s, by one instance: two checks, not four.
      expect((yield* checks).n).toBe(2)

      // host-a stops (a rolling restart): it releases the lease; host-b takes it at its next attempt (TTL / 3 = 5 s).
      yield* Scope.close(a.scope, Exit.void)
      expect(logs.find("lease.released").map((r) => r["instance"])).toEqual(["host-a"])
      yield* TestClock.adjust("5 seconds")
      yield* until("host-b to hold the lease", holder, (h) => Option.getOrUndefined(h) === "host-b")
      expect(logs.find("lease.taken").map((r) => r["instance"])).toEqual(["host-a", "host-b"])
      // host-b's first pass runs at once: the drift is still there (nobody booked it), confirmed and logged by host-b alone.
      yield* recheckScheduled
      yield* TestClock.adjust("20 seconds")
      yield* until("host-b's confirmed drift", checks, (c) => c.confirmed === 2)
      yield* until("host-b's drift line", Effect.sync(drifts), (d) => d.length >= 2)
      yield* pause(200)
      expect(drifts()).toHaveLength(2)
      expect((yield* checks).n).toBe(3)
      yield* Scope.close(b.scope, Exit.void)
      expect(yield* holder).toEqual(Option.none())
    }), { timeout: 60_000 })

  it.scoped("a holder that dies keeps its lease until it expires; then the other instance takes it", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      // host-c took the lease and died: no keeper renews it, nobody releases it.
      const dead = yield* Effect.provide(Leases, leasesOf("host-c"))
      expect(yield* dead.acquire(RECONCILIATION_LEASE)).toBe(true)
      const d = yield* startInstance("host-d")
      yield* TestClock.adjust("5 seconds")
      yield* pause(300) // host-d's attempt (a statement) answers in real time
      expect(yield* holder).toEqual(Option.some("host-c"))

      // LEASE_TTL_MS passed without a renewal.
      yield* sql`UPDATE leases SET expires_at = now() - interval '1 millisecond' WHERE name = ${RECONCILIATION_LEASE}`.pipe(Effect.orDie)
      expect(yield* holder).toEqual(Option.none())
      yield* TestClock.adjust("5 seconds")
      yield* until("host-d to hold the lease", holder, (h) => Option.getOrUndefined(h) === "host-d")
      // Back from the dead, host-c cannot take it back while host-d renews it.
      expect(yield* dead.acquire(RECONCILIATION_LEASE)).toBe(false)
      yield* Scope.close(d.scope, Exit.void)
    }), { timeout: 30_000 })

  it.effect("two instances asking for a free lease at the same moment: exactly one holds it", () =>
    Effect.gen(function* () {
      const instances = ["host-1", "host-2", "host-3", "host-4"]
      const won = yield* Effect.forEach(instances, (id) => Effect.flatMap(Effect.provide(Leases, leasesOf(id)), (l) => l.acquire("test.race")), { concurrency: "unbounded" })
      expect(won.filter(Boolean)).toHaveLength(1)
    }))
})

/** The scrape's lines, and one series' value (its name and labels as written, e.g. `x{instance="a"}`). */
const scrape = (baseUrl: string) => Effect.promise(() => fetch(`${baseUrl}/metrics`).then((r) => r.text()))
const valueOf = (text: string, series: string) => text.split("\n").find((l) => l.startsWith(`${series} `))?.split(" ")[1]

// LEASE_TTL_MS 3 s: the gauges' keeper renews every second (in real time: it gates output, never work to drive).
layer(TestApp({ LEASE_TTL_MS: "3000" }))("metrics across instances", (it) => {
  it.scoped("per-process series carry the instance; the database gauges come only from the instance holding their lease", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const me = (yield* Leases).instance
      const first = yield* scrape(baseUrl)
      expect(valueOf(first, `process_cpu_user_seconds_total{instance="${me}"}`)).toBeDefined()
      expect(valueOf(first, `marketplace_cluster_gauges_exporter{instance="${me}"}`)).toBe("1")
      expect(valueOf(first, `marketplace_settlement_backlog{state="reserved"}`)).toBe("0")

      // Another instance holds the lease: this one stops exporting the cluster-wide gauges (its own series stay).
      yield* sql`UPDATE leases SET holder = 'other-host', expires_at = now() + interval '1 hour' WHERE name = 'metrics.cluster-gauges'`.pipe(Effect.orDie)
      const other = yield* until("this instance to stop exporting", scrape(baseUrl), (t) => valueOf(t, `marketplace_cluster_gauges_exporter{instance="${me}"}`) === "0", 10_000)
      expect(other).not.toContain("marketplace_settlement_backlog")
      expect(other).not.toContain("marketplace_treasury_drift_micro_usdc")
      expect(valueOf(other, `marketplace_db_pool_max{instance="${me}"}`)).toBe("10")
      expect(other).toContain(`marketplace_http_requests_total{method="GET",route="/metrics",status="200",instance="${me}"}`)

      // That instance is gone and its lease expired: this one exports them again.
      yield* sql`UPDATE leases SET expires_at = now() - interval '1 millisecond' WHERE name = 'metrics.cluster-gauges'`.pipe(Effect.orDie)
      const back = yield* until("this instance to export again", scrape(baseUrl), (t) => valueOf(t, `marketplace_cluster_gauges_exporter{instance="${me}"}`) === "1", 10_000)
      expect(valueOf(back, "marketplace_treasury_drift_micro_usdc")).toBe("0")
    }), { timeout: 30_000 })
})
