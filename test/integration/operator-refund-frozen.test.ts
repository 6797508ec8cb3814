// The operator's decision on a suspended agent's frozen money, through real HTTP and the devnet: every held escrow goes
// back to its payer through the refund path (mined on chain, ledger equals chain), in each execution's history with who
// and why; refused (and recorded) while the agent is not suspended; once under repeated and concurrent calls; a later
// reinstatement releases nothing that was refunded. Also pulled from the /ops console with its confirmation.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { MachineHost } from "../../machines/Host.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, usdcBalance } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))
const AUTH = { authorization: `Bearer ${OPERATOR_TOKEN}` }

const api = (path: string, init: { json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, { method: init.json === undefined ? "GET" : "POST", headers: init.headers ?? {}, ...(init.json === undefined ? {} : { json: init.json }) })))
const op = (path: string) => api(`/api/v1/operator${path}`, { headers: AUTH })
const lever = (path: string, json: Record<string, unknown>, name = "alice") => api(`/api/v1/operator${path}`, { json, headers: { ...AUTH, "x-operator": name } })
const actor = (id: string) => Effect.map(op(`/machines/execution/actors/${id}`), (r) => r.body.data)
const history = (id: string) => Effect.map(op(`/machines/execution/actors/${id}/history?limit=200`), (r) => r.body.data.transitions as Array<any>)
const balance = (address: `0x${string}`) => Effect.promise(() => usdcBalance(address))

/** A paid call to an agent whose money is held for an hour (trusted tier): its request id. */
const heldCall = (agentId: string, payer: ReturnType<typeof devAccount>, text: string) =>
  Effect.gen(function* () {
    const paid = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text } })
    expect(paid.status).toBe(200)
    const requestId: string = paid.body.data.requestId
    expect((yield* actor(requestId)).summary).toMatchObject({ escrowStatus: "held" })
    return requestId
  })

layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }))("operator refund of frozen money", (it) => {
  it.scoped("refund-frozen sends every held escrow of a suspended agent back to its payer on chain, once, in each execution's history", () =>
    Effect.gen(function* () {
      yield* realNow
      const agentId = yield* registerAgent(devAccount(3), (yield* fakeAgent("echo")).url, { tier: "trusted" })
      const [p1, p2] = [devAccount(5), devAccount(6)]
      const calls = [yield* heldCall(agentId, p1, "one"), yield* heldCall(agentId, p1, "two"), yield* heldCall(agentId, p2, "three")]

      // Not suspended: refused, recorded, nothing moves.
      const early = yield* lever(`/agents/${agentId}/refund-frozen`, { reason: "too early" })
      expect(early.status).toBe(409)
      expect(early.body.error).toMatchObject({ code: "LEVER_NOT_APPLICABLE", details: { state: "active" } })
      expect((yield* actor(calls[0]!)).state).toBe("completed.held")

      expect((yield* lever(`/agents/${agentId}/suspend`, { reason: "fraud report" })).status).toBe(200)
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.000000", pending: "0.025500" })
      const before = { p1: yield* balance(p1.address), p2: yield* balance(p2.address) }

      // Two operators decide at once: one refunds all three, the other finds nothing held.
      const [a, b] = yield* Effect.all([
        lever(`/agents/${agentId}/refund-frozen`, { reason: "fraud confirmed" }, "alice"),
        lever(`/agents/${agentId}/refund-frozen`, { reason: "fraud confirmed" }, "bob")
      ], { concurrency: 2 })
      expect([a.status, b.status].sort()).toEqual([200, 409])
      const applied = a.status === 200 ? a : b
      const refused = a.status === 200 ? b : a
      expect(applied.body.data).toMatchObject({
        action: "refund_frozen",
        machine: "agent",
        actorId: agentId,
        outcome: "applied",
        from: "suspended",
        reason: "fraud confirmed",
        details: { refunded: 3, amount: "33000" }
      })
      expect(refused.body.error).toMatchObject({ code: "LEVER_NOT_APPLICABLE", details: { state: "suspended" } })
      const who: string = applied.body.data.operator

      for (const id of calls) expect(yield* actor(id)).toMatchObject({ state: "refunding", summary: { status: "completed", escrowStatus: "refunding", refundStatus: "pending" } })
      const refunds = yield* Refunds
      expect(yield* refunds.sendDue).toBe(3)
      expect(yield* refunds.sendDue).toBe(0)
      expect((yield* balance(p1.address)) - before.p1).toBe(22_000n)
      expect((yield* balance(p2.address)) - before.p2).toBe(11_000n)
      for (const id of calls) {
        const refunded = yield* actor(id)
        expect(refunded).toMatchObject({ state: "refunded", summary: { status: "refunded", escrowStatus: "refunded", refundStatus: "confirmed" } })
        const transitions = yield* history(id)
        expect(transitions.slice(-2)).toMatchObject([
          { event: "OPERATOR_REFUND", from: "completed.held", to: "refunding", payload: { by: who, reason: "fraud confirmed" }, operator: { name: who, action: "refund_frozen", reason: "fraud confirmed" } },
          { event: "REFUND_CONFIRMED", from: "refunding", to: "refunded" }
        ])
        expect(refunded.operatorActions).toEqual([expect.objectContaining({ action: "refund_frozen", outcome: "applied", from: "completed.held", to: "refunding" })])
      }
      // The agent never earns the refunded money.
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.000000", pending: "0.000000" })

      // A third call: nothing held, refused; reinstatement re-arms nothing; the release time passes: nothing released.
      expect((yield* lever(`/agents/${agentId}/refund-frozen`, { reason: "again" })).body.error).toMatchObject({ code: "LEVER_NOT_APPLICABLE" })
      const reinstated = yield* lever(`/agents/${agentId}/reinstate`, { reason: "appeal" })
      expect(reinstated.body.data).toMatchObject({ outcome: "applied", details: { releasesRearmed: 0 } })
      yield* TestClock.adjust(3_600_000 + 1_000)
      yield* (yield* MachineHost).fireDue
      for (const id of calls) expect((yield* actor(id)).state).toBe("refunded")
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.000000", pending: "0.000000" })
      expect((yield* balance(p1.address)) - before.p1).toBe(22_000n)
      expect(yield* ledgerMatchesChain).toBe(0n)

      const actions = (yield* op(`/actions?machine=agent&actorId=${agentId}`)).body.data.actions
      expect(actions.map((x: { action: string; outcome: string }) => `${x.action}:${x.outcome}`)).toEqual([
        "reinstate:applied",
        "refund_frozen:refused",
        "refund_frozen:refused",
        "refund_frozen:applied",
        "suspend:applied",
        "refund_frozen:refused",
        "pin_trust_tier:applied"
      ])
    }), 120_000)

  it.scoped("the /ops console offers the refund on a suspended agent's execution, asks for confirmation, and pulls it", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const agentId = yield* registerAgent(devAccount(4), (yield* fakeAgent("echo")).url, { tier: "trusted" })
      const payer = devAccount(6)
      const requestId = yield* heldCall(agentId, payer, "console")
      expect((yield* lever(`/agents/${agentId}/suspend`, { reason: "investigation" })).status).toBe(200)

      const form = (path: string, fields: Record<string, string>, cookie = "") =>
        Effect.promise(() =>
          fetch(`${baseUrl}${path}`, {
            method: "POST",
            redirect: "manual",
            headers: { "content-type": "application/x-www-form-urlencoded", cookie },
            body: new URLSearchParams(fields).toString()
          }))
      const login = yield* form("/ops/login", { token: OPERATOR_TOKEN })
      expect(login.status).toBe(303)
      const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] ?? ""
      const page = yield* Effect.promise(() => fetch(`${baseUrl}/ops/machines/execution/${requestId}`, { headers: { cookie } }).then((r) => r.text()))
      expect(page).toContain(`data-lever="refund_frozen"`)
      const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? ""
      const fields = { csrf, lever: "refund_frozen", target: agentId, kind: "execution", id: requestId, operator: "carol", reason: "refund the victims" }

      // Without the confirmation box: nothing happens.
      expect((yield* form("/ops/levers", fields, cookie)).status).toBe(303)
      expect((yield* actor(requestId)).state).toBe("completed.held")
      expect((yield* form("/ops/levers", { ...fields, confirm: "yes" }, cookie)).status).toBe(303)
      expect(yield* actor(requestId)).toMatchObject({ state: "refunding", operatorActions: [expect.objectContaining({ operator: "carol", action: "refund_frozen" })] })
      const before = yield* balance(payer.address)
      expect(yield* (yield* Refunds).sendDue).toBe(1)
      expect((yield* balance(payer.address)) - before).toBe(11_000n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), 120_000)
})
