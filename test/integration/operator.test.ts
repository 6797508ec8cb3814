// The operator API through real HTTP: the token guard, inspection of real machines (a paid execution's snapshot, history
// and timers; counts per state), platform statistics against the ledger, and transactions by requester and provider.
// The levers are in operator-levers.test.ts.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, type Envelope } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))
const AUTH = { authorization: `Bearer ${OPERATOR_TOKEN}` }

const get = (path: string, headers: Record<string, string> = AUTH) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}/api/v1/operator${path}`, { headers })))
const rawText = (path: string, init: RequestInit) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const response = await fetch(`${baseUrl}/api/v1/operator${path}`, init)
      return { status: response.status, text: await response.text() }
    }))

/** Every page of a keyset list, following nextCursor. */
const allPages = (path: string, key: string, limit: number) =>
  Effect.gen(function* () {
    const items: Array<Record<string, unknown>> = []
    let cursor: string | null = null
    do {
      const separator = path.includes("?") ? "&" : "?"
      const page: { readonly status: number; readonly body: Envelope } = yield* get(`${path}${separator}limit=${limit}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)
      expect(page.status).toBe(200)
      expect(page.body.data[key].length).toBeLessThanOrEqual(limit)
      items.push(...page.body.data[key])
      cursor = page.body.data.pagination.nextCursor
    } while (cursor !== null)
    return items
  })

// Wrong tokens from one address would soon be throttled (429, test/integration/operator-token-limit.test.ts); this file
// checks what each refusal says, so it allows many.
layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", OPS_LOGIN_MAX_FAILURES: "1000" }))("operator API", (it) => {
  it.scoped("without the operator token, or with a wrong one, every operator endpoint answers 401 and the body reveals nothing", () =>
    Effect.gen(function* () {
      const wrong = [
        {},
        { authorization: "Bearer " },
        { authorization: `Bearer ${OPERATOR_TOKEN.slice(0, -1)}x` },
        { authorization: `Bearer ${OPERATOR_TOKEN.slice(0, 8)}` },
        { authorization: `Bearer ${OPERATOR_TOKEN}${OPERATOR_TOKEN}` },
        { authorization: `Basic ${Buffer.from(`op:${OPERATOR_TOKEN}`).toString("base64")}` }
      ]
      const paths: Array<[string, string]> = [
        ["GET", "/machines"],
        ["GET", "/machines/execution?state=running"],
        ["GET", "/machines/execution/actors/req_x/history"],
        ["GET", "/stats"],
        ["GET", `/transactions/requester/${devAccount(7).address}`],
        ["POST", "/settlements/pay_x/retry"],
        ["POST", "/agents/00000000-0000-4000-8000-000000000000/suspend"]
      ]
      for (const headers of wrong) {
        for (const [method, path] of paths) {
          const response = yield* rawText(path, {
            method,
            headers: { ...headers, "x-operator": "mallory", "content-type": "application/json" },
            ...(method === "POST" ? { body: JSON.stringify({ reason: "probe" }) } : {})
          })
          expect(response.status, `${method} ${path}`).toBe(401)
          expect(JSON.parse(response.text)).toEqual({
            success: false,
            error: { code: "OPERATOR_AUTH_REQUIRED", message: "operator endpoints need Authorization: Bearer <OPERATOR_TOKEN>" }
          })
          expect(response.text).not.toContain(OPERATOR_TOKEN.slice(0, 6))
        }
      }
      // Nothing a refused caller tried was recorded.
      const { sql } = yield* TestEnv
      expect(yield* sql`SELECT 1 FROM operator_actions`).toHaveLength(0)
      // With the token, a lever still needs a name and a reason.
      const { baseUrl } = yield* TestEnv
      const lever = (headers: Record<string, string>, body: unknown) =>
        Effect.promise(() => call(`${baseUrl}/api/v1/operator/settlements/pay_x/retry`, { method: "POST", headers: { ...AUTH, ...headers }, json: body }))
      expect((yield* lever({}, { reason: "because" })).body.error?.code).toBe("VALIDATION_ERROR")
      expect((yield* lever({ "x-operator": "alice" }, {})).body.error?.code).toBe("VALIDATION_ERROR")
      expect((yield* lever({ "x-operator": "alice" }, { reason: "   " })).body.error?.code).toBe("VALIDATION_ERROR")
      const unknown = yield* lever({ "x-operator": "alice" }, { reason: "because" })
      expect(unknown.status).toBe(404)
      expect(unknown.body.error?.code).toBe("ACTOR_NOT_FOUND")
    }))

  it.scoped("a paid execution is listed in its state, counted, and shows its snapshot, full history and pending release timer", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "trusted" })
      const payer = devAccount(7)
      const paid = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "inspect me" } })
      expect(paid.status).toBe(200)
      const requestId: string = paid.body.data.requestId

      const listed = (yield* get("/machines/execution?state=completed.held")).body.data
      expect(listed).toMatchObject({ kind: "execution", state: "completed.held", pagination: { hasMore: false, nextCursor: null } })
      expect(listed.actors.map((a: { id: string }) => a.id)).toEqual([requestId])
      expect((yield* get("/machines/execution?state=running")).body.data.actors).toEqual([])

      const counts = (yield* get("/machines/execution/counts")).body.data
      expect(counts.total).toBe(1)
      expect(counts.states).toContainEqual({ state: "completed.held", count: 1 })
      expect(counts.states).toContainEqual({ state: "refunded", count: 0 })
      const overview = (yield* get("/machines")).body.data
      expect(overview.map((k: { kind: string }) => k.kind)).toEqual(["execution", "settlement", "circuit", "treasury", "withdrawal", "dispute", "webhookDelivery", "chain", "channel"])
      // Two payments settled: the agent's registration and the call.
      expect(overview.find((k: { kind: string }) => k.kind === "settlement").states).toContainEqual({ state: "settled", count: 2 })

      const actor = (yield* get(`/machines/execution/actors/${requestId}`)).body.data
      expect(actor).toMatchObject({
        kind: "execution",
        id: requestId,
        state: "completed.held",
        snapshot: { value: { completed: "held" }, context: { payment: "settled", frozen: false } },
        summary: { status: "completed", agentId, agentStatus: "active", payer: payer.address.toLowerCase(), escrowStatus: "held", refundId: null }
      })
      const releaseAt = actor.snapshot.context.releaseAt as number
      expect(actor.timers).toEqual([{ source: "timer", event: "RELEASE_DUE", dueAt: new Date(releaseAt).toISOString(), attempts: 0, armedAt: expect.any(String) }])
      expect(actor.operatorActions).toEqual([])

      // The history, whole and then one transition per page, agree: from its start to the held release.
      const history = (yield* get(`/machines/execution/actors/${requestId}/history`)).body.data
      const events = history.transitions.map((t: { event: string }) => t.event)
      expect(history.transitions[0]).toMatchObject({ from: null, to: "running" })
      expect(events).toEqual(expect.arrayContaining(["AGENT_SUCCEEDED", "PAYMENT_SETTLED"]))
      expect(history.transitions.at(-1)).toMatchObject({ to: "completed.held", operator: null })
      for (const t of history.transitions) expect(new Date(t.at).toISOString()).toBe(t.at)
      const paged = yield* allPages(`/machines/execution/actors/${requestId}/history`, "transitions", 1)
      expect(paged).toEqual(history.transitions)

      // Its payment's machine, reached from the execution's summary.
      const payment = (yield* get(`/machines/settlement/actors/${actor.summary.paymentId}`)).body.data
      expect(payment).toMatchObject({ state: "settled", summary: { purpose: "execution", subjectId: requestId }, timers: [] })
      const settlementHistory = (yield* get(`/machines/settlement/actors/${actor.summary.paymentId}/history`)).body.data.transitions
      expect(settlementHistory.map((t: { event: string; to: string }) => `${t.event}→${t.to}`)).toEqual(["RESERVED→reserved", "SETTLED→settled"])
      // The agent's circuit, keyed by the agent id.
      expect((yield* get(`/machines/circuit/actors/${agentId}`)).body.data).toMatchObject({ state: "closed", summary: { agentStatus: "active" } })

      expect((yield* get("/machines/execution/actors/req_nope")).body.error?.code).toBe("ACTOR_NOT_FOUND")
      expect((yield* get("/machines/circuit/actors/not-a-uuid/history")).body.error?.code).toBe("ACTOR_NOT_FOUND")
      expect((yield* get("/machines/escrow")).body.error?.code).toBe("VALIDATION_ERROR")
      expect((yield* get("/machines/execution?cursor=nonsense")).body.error?.code).toBe("VALIDATION_ERROR")
    }))

  it.scoped("platform statistics: the fees collected equal the ledger's platform revenue, in total, by kind and by day", () =>
    Effect.gen(function* () {
      yield* realNow
      const agentId = yield* registerAgent(devAccount(2), (yield* fakeAgent("echo")).url, { tier: "premium" })
      for (const text of ["a", "b"]) expect((yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text } })).status).toBe(200)
      const revenue = -(yield* (yield* Ledger).balance(Accounts.platformRevenue))
      expect(revenue).toBeGreaterThan(0n)

      const stats = (yield* get("/stats?days=7")).body.data
      expect(stats.fees.total).toBe(formatUsdc(revenue))
      const micros = (s: string) => BigInt(s.replace(".", ""))
      expect(stats.fees.byKind.reduce((sum: bigint, k: { amount: string }) => sum + micros(k.amount), 0n)).toBe(revenue)
      expect(stats.fees.byKind.map((k: { kind: string }) => k.kind)).toEqual(expect.arrayContaining(["registration_fee", "escrow_release"]))
      expect(stats.fees.byDay).toHaveLength(7)
      expect(stats.fees.byDay.at(-1).date).toBe(new Date().toISOString().slice(0, 10))
      expect(stats.fees.byDay.reduce((sum: bigint, d: { fees: string }) => sum + micros(d.fees), 0n)).toBe(revenue)
      expect(stats.fees.byDay.at(-1)).toMatchObject({ executions: 3, completed: 3 })
      expect(stats.agents).toMatchObject({ total: 2, active: 2, suspended: 0 })
      expect(stats.transactions).toMatchObject({ total: 3, completed: 3 })
      expect((yield* get("/stats?days=91")).body.error?.code).toBe("VALIDATION_ERROR")
    }))

  it.scoped("transactions by requester (the paying wallet) and by provider, newest first, in keyset pages", () =>
    Effect.gen(function* () {
      yield* realNow
      const payer = devAccount(9)
      const agentId = yield* registerAgent(devAccount(3), (yield* fakeAgent("echo")).url, { tier: "premium" })
      for (let i = 0; i < 5; i++) {
        expect((yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: `t${i}` } })).status).toBe(200)
      }
      const { sql } = yield* TestEnv
      const expected = (yield* sql<{ transactionId: string }>`
        SELECT transaction_id FROM executions WHERE payer = ${payer.address.toLowerCase()} ORDER BY created_at DESC, id DESC`).map((r) => r.transactionId)
      expect(expected).toHaveLength(5)

      const byRequester = yield* allPages(`/transactions/requester/${payer.address}`, "transactions", 2)
      expect(byRequester.map((t) => t.id)).toEqual(expected)
      expect(byRequester[0]).toMatchObject({
        payer: payer.address.toLowerCase(),
        providing_agent: agentId,
        requesting_agent: null,
        capability_id: "echo",
        status: "completed",
        escrowStatus: "released"
      })
      const byProvider = yield* allPages(`/transactions/provider/${agentId}`, "transactions", 3)
      expect(byProvider.map((t) => t.id)).toEqual(expected)
      // Another provider's list does not hold them; a wallet that paid for nothing has none.
      expect((yield* get(`/transactions/provider/${(yield* sql<{ id: string }>`SELECT id FROM agents WHERE id <> ${agentId} LIMIT 1`)[0]!.id}`)).body.data.transactions
        .map((t: { id: string }) => t.id)).not.toContain(expected[0])
      expect((yield* get(`/transactions/requester/0x${"ab".repeat(20)}`)).body.data).toMatchObject({ transactions: [], pagination: { hasMore: false } })
      expect((yield* get("/transactions/requester/nobody")).body.error?.code).toBe("VALIDATION_ERROR")
      expect((yield* get(`/transactions/provider/${agentId}?limit=0`)).body.error?.code).toBe("VALIDATION_ERROR")
    }))
})
