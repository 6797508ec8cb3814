// Webhook recording in groups: the deliveries of one sender pass are recorded with fewer database round trips and
// transactions than deliveries (counted by a wire-protocol proxy in front of PostgreSQL), each attempt still logged once
// and stepped once, and a failing receiver's counts still exact.
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, TestClock } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { type CountingProxy, type PgStats, startPgProxy } from "../../bench/lib/proxies.js"
import * as UnitOfWork from "../../services/sql/UnitOfWork.js"
import { DeliveriesRepo } from "../../services/webhooks/DeliveriesRepo.js"
import { DISABLE_AFTER_FAILURES } from "../../services/webhooks/deliverySpec.js"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { WebhooksRepo } from "../../services/webhooks/Repo.js"
import { MachineHost } from "../../machines/Host.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

/** The counting proxy the service's database connections go through (one per test file). */
let proxy: CountingProxy<PgStats> | undefined
const throughProxy = (databaseUrl: string) =>
  Effect.gen(function* () {
    const url = new URL(databaseUrl)
    const counting = yield* Effect.acquireRelease(Effect.promise(() => startPgProxy(url.hostname, Number(url.port))), (p) => Effect.promise(p.close))
    proxy = counting
    url.host = counting.url
    return url.toString()
  })

/**
 * A receiver that holds each post until `batch` posts are waiting (or 300 ms passed), then answers them together with
 * the status `pick` gives: posts finish at about the same time, as they do when a pass's posts are fast.
 */
const receiver = (pick: (path: string) => number, batch: number) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly received: Array<string>; readonly server: http.Server }>((resume) => {
      const received: Array<string> = []
      let held: Array<() => void> = []
      let timer: NodeJS.Timeout | undefined
      const release = () => {
        if (timer !== undefined) clearTimeout(timer)
        timer = undefined
        const go = held
        held = []
        for (const answer of go) answer()
      }
      const server = http.createServer((req, res) => {
        req.resume()
        req.on("end", () => {
          const path = req.url ?? ""
          received.push(path)
          const status = pick(path)
          held.push(() => res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "ok" : "down"))
          if (held.length >= batch) release()
          else timer ??= setTimeout(release, 300)
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, server })))
    }),
    ({ server }) => Effect.sync(() => server.closeAllConnections()).pipe(Effect.zipRight(Effect.sync(() => server.close())))
  )

const api = (path: string, init: { json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() => call(`${baseUrl}${path}`, { method: init.json === undefined ? "GET" : "POST", ...(init.json === undefined ? {} : { json: init.json }), headers: init.headers ?? {} })))

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** Round trips and transactions of one sender pass, from the proxy. */
const measured = <A, E, R>(pass: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const p = proxy
    if (p === undefined) return yield* Effect.dieMessage("no proxy")
    p.reset()
    const claimed = yield* pass
    const stats = p.stats()
    return { claimed, roundTrips: stats.roundTrips, transactions: stats.transactions, byStatement: stats.byStatement }
  })

// Statements unprepared, so that every one is named in the proxy's counts (the agent cache's heartbeat is told apart).
layer(TestApp({ BACKGROUND_WORKERS: "false", DATABASE_PREPARED_STATEMENTS: "false" }, { databaseVia: throughProxy }))("webhook recording in groups", (it) => {
  it.scoped("a pass's deliveries are recorded in fewer transactions than deliveries, each attempt logged once and stepped once, a failing webhook's counts exact", () =>
    Effect.gen(function* () {
      yield* realNow
      const dispatcher = yield* Dispatcher
      const { sql } = yield* TestEnv
      const owner = devAccount(1)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      // Two webhooks of a paid call's events, one answering 200, the other 500: the agent's registration (its payment)
      // and 2 paid calls make 7 deliveries to each.
      const hook = yield* receiver((path) => (path.startsWith("/down") ? 500 : 200), 8)
      const subscribe = (path: string) =>
        Effect.flatMap(Effect.promise(() => walletAuth(owner, agentId)), (headers) => api("/api/v1/webhooks", { json: { agentId, url: `${hook.url}${path}`, events: ["payment.received", "execution.completed", "escrow.released"] }, headers }))
      const up = (yield* subscribe("/up")).body.data.id as string
      const down = (yield* subscribe("/down")).body.data.id as string
      for (const text of ["a", "b"]) expect((yield* execute(devAccount(2), { targetAgentId: agentId, capabilityId: "echo", input: { text } })).status).toBe(200)
      yield* dispatcher.dispatchDue

      const pass = yield* measured(dispatcher.sendDue)
      expect(pass.claimed).toBe(14)
      expect(hook.received).toHaveLength(14)
      const perDelivery = pass.roundTrips / pass.claimed
      console.log(`webhook pass: ${pass.claimed} deliveries, ${pass.roundTrips} round trips (${perDelivery.toFixed(2)} per delivery), ${pass.transactions} transactions`)
      for (const [statement, c] of pass.byStatement) console.log(`  ${c.count}× ${statement}`)
      expect(pass.transactions).toBeLessThan(pass.claimed)
      expect(perDelivery).toBeLessThan(3)

      // Each delivery: one attempt row, one transition for it, its machine's count of attempts 1.
      const rows = yield* sql<{ id: string; subscriptionId: string; status: string; attemptCount: number; attempts: number; steps: number }>`
        SELECT d.id, d.subscription_id, d.status, d.attempt_count,
               (SELECT count(*)::int FROM webhook_attempts a WHERE a.delivery_id = d.id) AS attempts,
               (SELECT count(*)::int FROM machine_transitions t WHERE t.machine = 'webhookDelivery' AND t.actor_id = d.id
                  AND t.event_type IN ('DELIVERED', 'ATTEMPT_FAILED')) AS steps
        FROM webhook_deliveries d ORDER BY d.id`
      expect(rows).toHaveLength(14)
      for (const r of rows) expect(r).toMatchObject({ attempts: 1, steps: 1, attemptCount: 1, status: r.subscriptionId === up ? "delivered" : "pending" })
      const subs = yield* sql<{ id: string; failureCount: number; isActive: boolean; lastSuccess: Date | null; lastFailure: Date | null }>`
        SELECT id, failure_count, is_active, last_success, last_failure FROM webhook_subscriptions ORDER BY id`
      const byId = new Map(subs.map((s) => [s.id, s]))
      expect(byId.get(up)).toMatchObject({ failureCount: 0, isActive: true, lastFailure: null })
      expect(byId.get(up)?.lastSuccess).not.toBeNull()
      expect(byId.get(down)).toMatchObject({ failureCount: 7, isActive: true, lastSuccess: null })

      // Their retries (1 s later): the 10th failure in a row switches the failing webhook off; its remaining retries wait.
      yield* TestClock.adjust(1_001)
      yield* dispatcher.sendDue
      const [off] = yield* sql<{ failureCount: number; isActive: boolean }>`SELECT failure_count, is_active FROM webhook_subscriptions WHERE id = ${down}`
      expect(off?.isActive).toBe(false)
      expect(off?.failureCount).toBeGreaterThanOrEqual(10)
      const [attempts] = yield* sql<{ n: number; steps: number }>`
        SELECT count(*)::int AS n, (SELECT count(*)::int FROM machine_transitions t JOIN webhook_deliveries d ON d.id = t.actor_id
                                    WHERE t.machine = 'webhookDelivery' AND d.subscription_id = ${down} AND t.event_type = 'ATTEMPT_FAILED') AS steps
        FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.subscription_id = ${down}`
      // Every failed attempt is counted once: posts, attempt rows, steps and the failure count agree.
      expect(attempts?.n).toBe(off?.failureCount)
      expect(attempts?.steps).toBe(off?.failureCount)
      expect(hook.received.filter((p) => p.startsWith("/down"))).toHaveLength(off?.failureCount ?? -1)
    }), { timeout: 60_000 })

  it.scoped("outcomes recorded together count as they would one by one (a success resets the streak, the 10th failure switches off), in 4 round trips", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const host = yield* MachineHost
      const [deliveries, webhooks] = yield* Effect.provide(Effect.all([DeliveriesRepo, WebhooksRepo]), Layer.mergeAll(DeliveriesRepo.Default, WebhooksRepo.Default))
      const owner = devAccount(3)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url)
      /** The spec's rule, one attempt after another. */
      const oneByOne = (count: number, outcomes: string) => {
        let failures = count
        let active = true
        for (const o of outcomes) {
          if (o === "S") failures = 0
          else {
            failures++
            active = active && failures < DISABLE_AFTER_FAILURES
          }
        }
        return { failureCount: failures, isActive: active }
      }
      const cases: ReadonlyArray<readonly [number, string]> = [[8, "FSF"], [9, "FFS"], [0, "FFF"], [7, "SFF"], [9, "SF"], [3, "FSFFSF"], [0, "S"], [9, "F"]]
      const now = yield* TestClock.currentTimeMillis
      const planned: Array<{ readonly subscriptionId: string; readonly deliveryId: string; readonly success: boolean }> = []
      for (const [n, [count, outcomes]] of cases.entries()) {
        const subscriptionId = `wh_group_${n}`
        yield* webhooks.insert({ id: subscriptionId, agentId, url: "http://127.0.0.1:9/hook", events: ["*"], secretEncrypted: "unused", at: new Date(now) })
        yield* sql`UPDATE webhook_subscriptions SET failure_count = ${count} WHERE id = ${subscriptionId}`
        for (const [i, o] of [...outcomes].entries()) {
          const id = yield* deliveries.insert({ subscriptionId, eventId: `evt_group_${n}_${i}`, eventType: "execution.completed", body: "{}", snapshot: null, at: new Date(now) })
          planned.push({ subscriptionId, deliveryId: Option.getOrThrow(id), success: o === "S" })
        }
      }
      const p = proxy
      if (p === undefined) return yield* Effect.dieMessage("no proxy")
      p.reset()
      // As the recorder does: every row locked in one statement, then each delivery stepped once, in one unit of work.
      yield* UnitOfWork.transaction(sql)(Effect.gen(function* () {
        yield* host.lockAll("webhookDelivery", planned.map((d) => d.deliveryId))
        for (const [i, d] of planned.entries()) {
          const at = now + i
          yield* host.deliver("webhookDelivery", d.deliveryId, d.success ? { type: "DELIVERED", at, status: 200 } : { type: "ATTEMPT_FAILED", at, status: 500, error: "down" })
        }
      }))
      // The agent cache's heartbeat (a pg_notify every 200 ms on the same database) is not the unit's.
      const heartbeats = p.stats().byStatement.get("SELECT pg_notify($1, $2)")?.count ?? 0
      expect(p.stats().roundTrips - heartbeats).toBe(4)
      for (const [n, [count, outcomes]] of cases.entries()) {
        const [row] = yield* sql<{ failureCount: number; isActive: boolean; lastSuccess: Date | null; lastFailure: Date | null }>`
          SELECT failure_count, is_active, last_success, last_failure FROM webhook_subscriptions WHERE id = ${`wh_group_${n}`}`
        expect({ case: `${count} then ${outcomes}`, failureCount: row?.failureCount, isActive: row?.isActive }).toEqual({ case: `${count} then ${outcomes}`, ...oneByOne(count, outcomes) })
        expect(row?.lastFailure === null).toBe(!outcomes.includes("F"))
        expect(row?.lastSuccess === null).toBe(!outcomes.includes("S"))
      }
      const steps = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM machine_transitions WHERE machine = 'webhookDelivery' AND actor_id IN ${sql.in(planned.map((d) => d.deliveryId))}`
      expect(steps[0]?.n).toBe(planned.length)
    }), { timeout: 60_000 })
})
