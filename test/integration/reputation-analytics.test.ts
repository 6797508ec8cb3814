// Reputation and analytics after a known sequence of paid executions (successes, a failure refunded on chain, a
// delayed-settlement agent), checked against the ledger and the balances; ratings; the owner-only agent analytics;
// validation; the platform figures' cache. Workers are off and the TestClock drives time.
import { expect, layer } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import { MachineHost } from "../../machines/Host.js"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, execute, registerAgent } from "../support/scenario.js"
import { foldOutcomes } from "../support/reputation.js"

const today = (now: number) => new Date(now).toISOString().slice(0, 10)

layer(TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "60000", EXECUTION_RETRY_WINDOW_SECONDS: "600", ANALYTICS_CACHE_SECONDS: "60" }))(
  "reputation and analytics",
  (it) => {
    const get = (path: string, headers: Record<string, string> = {}) =>
      Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}${path}`, { headers })))
    const rate = (body: unknown, paymentHeader?: string) =>
      Effect.flatMap(TestEnv, ({ baseUrl }) =>
        Effect.promise(() =>
          call(`${baseUrl}/api/v1/reputation/ratings`, {
            method: "POST",
            json: body,
            headers: paymentHeader === undefined ? {} : { "X-PAYMENT": paymentHeader }
          })))
    /** Wallet-signature headers signed at the server's (test) clock. */
    const signed = (ownerIndex: number, agentId: string, options: { claimedWallet?: string } = {}) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.promise(() => walletAuth(devAccount(ownerIndex), agentId, { timestamp: now + Math.floor(Math.random() * 1000), ...options })))

    it.scoped("successes, a refunded failure and ratings give the documented scores, events, figures and leaderboards", () =>
      Effect.gen(function* () {
        yield* Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))
        const { sql } = yield* TestEnv
        const machines = yield* MachineHost
        const refunds = yield* TreasuryWorker
        const ledger = yield* Ledger
        const fast = yield* fakeAgent("echo")
        const slow = yield* fakeAgent("echo")
        // A premium agent settles at once (earnings released); a new one holds earnings for 24 hours (pending).
        const a = yield* registerAgent(devAccount(1), fast.url, { tier: "premium" })
        const b = yield* registerAgent(devAccount(3), slow.url)
        const payer = devAccount(2)
        const run = (agentId: string) => execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "hi" } })

        const first = yield* run(a)
        const second = yield* run(a)
        expect([first.status, second.status]).toEqual([200, 200])
        fast.setBehaviour({ kind: "json", status: 500, body: { error: "nope" } })
        const failed = yield* run(a)
        expect(failed.status).toBe(502)
        const failedId: string = failed.body.error?.details.requestId
        const held = yield* run(b)
        expect(held.status).toBe(200)

        // Reputation: 50 + 1 + 1 - 2 for A, 50 + 1 for B (once the outcomes are folded); events newest first.
        yield* foldOutcomes
        const profile = yield* get(`/api/v1/reputation/${a}`)
        expect(profile.status).toBe(200)
        expect(profile.body.data).toMatchObject({ agentId: a, score: 50, tier: "good", status: "active", meta: { minScore: 0, maxScore: 100, defaultScore: 50 } })
        expect(profile.body.data.recentEvents.map((e: { event_type: string; score_delta: number }) => [e.event_type, e.score_delta])).toEqual([
          ["transaction_fail", -2],
          ["transaction_success", 1],
          ["transaction_success", 1]
        ])
        expect(Object.keys(profile.body.data.recentEvents[0]).sort()).toEqual(["created_at", "details", "event_type", "id", "score_delta"])
        expect(profile.body.data.recentEvents[0].id).toMatch(/^evt_/)
        const page = yield* get(`/api/v1/reputation/${a}/events?limit=2&offset=1`)
        expect(page.body.data.pagination).toEqual({ total: 3, limit: 2, offset: 1, hasMore: false })
        expect(page.body.data.events.map((e: { event_type: string }) => e.event_type)).toEqual(["transaction_success", "transaction_success"])
        expect((yield* get(`/api/v1/reputation/${a}/events`)).body.data.pagination).toEqual({ total: 3, limit: 50, offset: 0, hasMore: false })

        // Ratings: the payer of a completed root execution, once, with that execution's X-PAYMENT.
        const firstHeader = first.headers.get("x-payment-used") ?? ""
        const secondHeader = second.headers.get("x-payment-used") ?? ""
        expect(firstHeader).not.toBe("")
        const firstId: string = first.body.data.requestId
        expect((yield* rate({ requestId: firstId, rating: 5 })).body.error?.code).toBe("RATING_NOT_AUTHORIZED")
        expect((yield* rate({ requestId: firstId, rating: 5 }, secondHeader)).status).toBe(403)
        const rated = yield* rate({ requestId: firstId, rating: 5 }, firstHeader)
        expect(rated.status).toBe(201)
        expect(rated.body.data).toMatchObject({ agentId: a, requestId: firstId, rating: 5, score_delta: 2, score: 52, tier: "good" })
        const again = yield* rate({ requestId: firstId, rating: 1 }, firstHeader)
        expect([again.status, again.body.error?.code, again.body.error?.details?.reason]).toEqual([409, "RATING_NOT_ALLOWED", "already_rated"])
        const notDone = yield* rate({ requestId: failedId, rating: 1 }, failed.headers.get("x-payment-used") ?? "")
        expect([notDone.status, notDone.body.error?.details?.reason]).toEqual([409, "not_completed"])
        expect((yield* rate({ requestId: "req_nope", rating: 3 }, firstHeader)).status).toBe(404)
        for (const rating of [0, 6, 2.5, "5"]) {
          expect((yield* rate({ requestId: firstId, rating }, firstHeader)).body.error?.code).toBe("VALIDATION_ERROR")
        }
        const events = (yield* get(`/api/v1/reputation/${a}/events`)).body.data
        expect(events.pagination.total).toBe(4)
        expect(events.events[0]).toMatchObject({ event_type: "rating", score_delta: 2, details: "rated 5 of 5 stars" })
        // Discovery sees the new standing at once (score 52, health after one failure 0.9).
        const listed = (yield* get(`/api/v1/discover?limit=50`)).body.data.agents.find((x: { id: string }) => x.id === a)
        expect(listed).toMatchObject({ reputation_score: 52, health_score: 0.9 })

        const board = yield* get("/api/v1/reputation/leaderboard")
        expect(board.body.data.leaderboard).toEqual([
          { rank: 1, agentId: a, name: expect.any(String), score: 52, tier: "good" },
          { rank: 2, agentId: b, name: expect.any(String), score: 51, tier: "good" }
        ])

        // Platform figures: 4 executions, 3 completed and paid (2 released for A, 1 held for B).
        const platform = (yield* get("/api/v1/analytics/platform")).body.data
        expect(platform).toMatchObject({
          agents: { total: 2, active: 2, newLast7Days: 2 },
          transactions: { total: 4, completed: 3, last24Hours: 4, last7Days: 4 },
          volume: { totalGMV: "0.033000", gmvLast24Hours: "0.033000", gmvLast7Days: "0.033000" }
        })
        // The same money in the ledger: escrow released (A's two calls) plus escrow still held (B's call).
        const [released] = yield* sql<{ total: string }>`
          SELECT coalesce(sum(e.amount), 0)::text AS total FROM ledger_entries e JOIN ledger_transfers t ON t.id = e.transfer_id
          WHERE t.kind = 'escrow_release' AND e.account_id = 'escrow'`
        const [stillHeld] = yield* sql<{ total: string }>`
          SELECT coalesce(sum(s.amount), 0)::text AS total FROM escrows s JOIN executions x ON x.id = s.execution_id
          WHERE s.status = 'held' AND x.status = 'completed'`
        expect(BigInt(released?.total ?? "x") + BigInt(stillHeld?.total ?? "x")).toBe(33_000n)
        expect(-(yield* ledger.balance(Accounts.escrow))).toBe(11_000n + 11_000n) // B's held call and A's failed call

        // The agent's own analytics: owner only, figures that agree with its balance.
        const mine = yield* get(`/api/v1/analytics/agent/${a}`, yield* signed(1, a))
        expect(mine.status).toBe(200)
        const balance = (yield* balanceOf(a)).body.data
        expect(mine.body.data).toMatchObject({
          executionCount: 3,
          successRate: 0.6667,
          totalRevenue: "0.017000",
          platformComparison: { avgSuccessRate: 0.75, percentileRank: 50 }
        })
        expect(BigInt(balance.totalEarned.replace(".", "")) + BigInt(balance.pending.replace(".", ""))).toBe(17_000n)
        expect(mine.body.data.timeSeries).toHaveLength(30)
        const now = yield* Clock.currentTimeMillis
        expect(mine.body.data.timeSeries.at(-1)).toMatchObject({ date: today(now), executions: 3, completed: 2, revenue: "0.017000" })
        expect(mine.body.data.timeSeries[0]).toMatchObject({ executions: 0, completed: 0, revenue: "0.000000", avgResponseTimeMs: null })
        const theirs = (yield* get(`/api/v1/analytics/agent/${b}`, yield* signed(3, b))).body.data
        expect(theirs).toMatchObject({ executionCount: 1, successRate: 1, totalRevenue: (yield* balanceOf(b)).body.data.pending })
        const alias = yield* get(`/api/v1/agents/${a}/analytics`, yield* signed(1, a))
        expect(alias.body.data.totalRevenue).toBe("0.017000")
        const series = yield* get(`/api/v1/analytics/agent/${a}/timeseries?days=2`, yield* signed(1, a))
        expect(series.body.data).toMatchObject({ agentId: a, days: 2, data: [{ executions: 0 }, { date: today(now), executions: 3, completed: 2 }] })
        // Not with the bare address, not with another wallet; one signature serves again (a read, for its 5 minutes).
        expect((yield* get(`/api/v1/analytics/agent/${a}`, { "X-Agent-Wallet": devAccount(1).address })).status).toBe(401)
        expect((yield* get(`/api/v1/analytics/agent/${a}`, yield* signed(3, a))).body.error?.code).toBe("AUTH_WALLET_MISMATCH")
        const once = yield* signed(1, a)
        expect((yield* get(`/api/v1/analytics/agent/${a}`, once)).status).toBe(200)
        expect((yield* get(`/api/v1/analytics/agent/${a}`, once)).status).toBe(200)

        // Daily series: every day present, zeros where nothing happened.
        const volume = (yield* get("/api/v1/analytics/platform/timeseries?metric=volume&days=7")).body.data
        expect(volume.metric).toBe("volume")
        expect(volume.data).toHaveLength(7)
        expect(volume.data.slice(0, 6).every((d: { gmv: number; revenue: number }) => d.gmv === 0 && d.revenue === 0)).toBe(true)
        expect(volume.data[6]).toEqual({ date: today(now), gmv: 0.033, revenue: 0.0075 })
        const transactions = (yield* get("/api/v1/analytics/platform/timeseries?days=3")).body.data
        expect(transactions).toMatchObject({ metric: "transactions", days: 3 })
        expect(transactions.data[2]).toEqual({ date: today(now), total: 4, completed: 3 })
        expect((yield* get("/api/v1/analytics/platform/timeseries?metric=agents")).body.data.data).toHaveLength(30)

        const byExecutions = (yield* get("/api/v1/analytics/leaderboard")).body.data
        expect(byExecutions.sortBy).toBe("executions")
        expect(byExecutions.agents.map((x: { id: string; execution_count: number; totalEarned: string }) => [x.id, x.execution_count, x.totalEarned]))
          .toEqual([[a, 3, "0.017000"], [b, 1, "0.000000"]])
        expect((yield* get("/api/v1/analytics/leaderboard?sort=revenue&limit=1")).body.data.agents).toMatchObject([{ rank: 1, id: a, totalEarned: balance.totalEarned }])
        expect((yield* get("/api/v1/analytics/leaderboard?sort=reputation")).body.data.agents[0]).toMatchObject({ id: a, reputation_score: 52 })

        // The platform figures are cached for 60 s: a new execution shows only after that.
        yield* run(b)
        const cached = (yield* get("/api/v1/analytics/platform")).body.data
        expect(cached).toEqual(platform)
        yield* TestClock.adjust(61_000)
        const fresh = (yield* get("/api/v1/analytics/platform")).body.data
        expect(fresh.transactions.total).toBe(5)
        expect(fresh.volume.totalGMV).toBe("0.044000")
        expect(Date.parse(fresh.generatedAt) - Date.parse(platform.generatedAt)).toBeGreaterThanOrEqual(61_000)

        // The failure is refunded on chain when its retry window closes: no further reputation event, no volume.
        yield* TestClock.adjust(600_000)
        yield* machines.fireDue
        yield* refunds.processDue
        yield* foldOutcomes
        const [refunded] = yield* sql<{ status: string }>`SELECT status FROM executions WHERE id = ${failedId}`
        expect(refunded?.status).toBe("refunded")
        expect((yield* get(`/api/v1/reputation/${a}`)).body.data.score).toBe(52)
        expect((yield* get(`/api/v1/reputation/${a}/events`)).body.data.pagination.total).toBe(4)
        const after = (yield* get(`/api/v1/analytics/agent/${a}`, yield* signed(1, a))).body.data
        expect(after).toMatchObject({ executionCount: 3, successRate: 0.6667, totalRevenue: "0.017000" })
        expect(yield* sql`SELECT * FROM ledger_unbalanced_transfers`).toEqual([])
      }))

    it.effect("query parameters are validated: unknown metric or sort, out-of-range days and limits are 400", () =>
      Effect.gen(function* () {
        const agentId = "00000000-0000-4000-8000-000000000001"
        for (const path of [
          "/api/v1/analytics/platform/timeseries?metric=revenue",
          "/api/v1/analytics/platform/timeseries?days=0",
          "/api/v1/analytics/platform/timeseries?days=91",
          "/api/v1/analytics/platform/timeseries?days=7.5",
          "/api/v1/analytics/leaderboard?sort=random",
          "/api/v1/analytics/leaderboard?limit=51",
          "/api/v1/reputation/leaderboard?limit=0",
          "/api/v1/reputation/leaderboard?limit=51",
          `/api/v1/reputation/${agentId}/events?limit=101`,
          `/api/v1/reputation/${agentId}/events?offset=-1`,
          "/api/v1/reputation/not-a-uuid"
        ]) {
          const response = yield* get(path)
          expect({ path, status: response.status, code: response.body.error?.code }).toEqual({ path, status: 400, code: "VALIDATION_ERROR" })
        }
        expect((yield* get(`/api/v1/reputation/${agentId}`)).body.error?.code).toBe("AGENT_NOT_FOUND")
        expect((yield* get(`/api/v1/reputation/${agentId}/events`)).status).toBe(404)
      }))
  }
)
