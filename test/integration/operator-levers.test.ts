// Operator levers through real HTTP, each with its effect and its record in the actor's history: suspend and reinstate an
// agent (out of discovery, AGENT_NOT_FOUND, escrow frozen then released), force a circuit, retry a failed refund and a
// failed settlement, requeue a dead-lettered webhook delivery. Afterwards the ledger's treasury equals the chain's.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { encodeAbiParameters, keccak256, pad, toHex } from "viem"
import { inject } from "vitest"
import { MachineHost } from "../../machines/Host.js"
import { Payments } from "../../services/payments/Payments.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, publicClient, TREASURY, usdcBalance, walletAuth } from "../support/clients.js"
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
const history = (kind: string, id: string) => Effect.map(op(`/machines/${kind}/actors/${id}/history?limit=200`), (r) => r.body.data.transitions as Array<any>)
const listed = (agentId: string) =>
  Effect.map(api("/api/v1/discover?limit=50&minHealth=0"), (r) => r.body.data.agents.some((a: { id: string }) => a.id === agentId))

/** The next settlement "crashes" before it is sent (then settlements pass again). */
const crash = { next: false }

layer(
  TestApp(
    { BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" },
    { faults: { beforeSettle: () => (crash.next ? Effect.sync(() => void (crash.next = false)).pipe(Effect.zipRight(Effect.die("simulated crash"))) : Effect.void) } }
  )
)("operator levers", (it) => {
  it.scoped("suspend: out of discovery, execution AGENT_NOT_FOUND, its held money not released; reinstate: listed again and released", () =>
    Effect.gen(function* () {
      yield* realNow
      const agentId = yield* registerAgent(devAccount(1), (yield* fakeAgent("echo")).url, { tier: "trusted" })
      const payer = devAccount(7)
      const paid = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "held for an hour" } })
      expect(paid.status).toBe(200)
      const requestId: string = paid.body.data.requestId
      expect(yield* listed(agentId)).toBe(true)

      const suspended = yield* lever(`/agents/${agentId}/suspend`, { reason: "terms violation" })
      expect(suspended.status).toBe(200)
      expect(suspended.body.data).toMatchObject({ operator: "alice", action: "suspend", machine: "agent", actorId: agentId, reason: "terms violation", outcome: "applied", from: "active", to: "suspended" })
      expect(suspended.body.data.tokenFingerprint).toMatch(/^[0-9a-f]{16}$/)
      expect(yield* listed(agentId)).toBe(false)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const refused = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "again" } })
      expect(refused.status).toBe(404)
      expect(refused.body.error?.code).toBe("AGENT_NOT_FOUND")
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      const again = yield* lever(`/agents/${agentId}/suspend`, { reason: "twice" }, "bob")
      expect(again.status).toBe(409)
      expect(again.body.error).toMatchObject({ code: "LEVER_NOT_APPLICABLE", details: { state: "suspended" } })

      // The release falls due while suspended: refused, the money stays held.
      yield* TestClock.adjust(3_600_000 + 1_000)
      const host = yield* MachineHost
      yield* host.fireDue
      const frozen = (yield* op(`/machines/execution/actors/${requestId}`)).body.data
      expect(frozen).toMatchObject({ state: "completed.held", summary: { escrowStatus: "held", agentStatus: "suspended" }, timers: [] })
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.000000", pending: "0.008500" })

      const reinstated = yield* lever(`/agents/${agentId}/reinstate`, { reason: "appeal upheld" }, "bob")
      expect(reinstated.body.data).toMatchObject({ operator: "bob", action: "reinstate", outcome: "applied", from: "suspended", to: "active", details: { releasesRearmed: 1 } })
      expect(yield* listed(agentId)).toBe(true)
      const rearmed = (yield* op(`/machines/execution/actors/${requestId}`)).body.data
      expect(rearmed.timers).toEqual([expect.objectContaining({ source: "timer", event: "RELEASE_DUE" })])
      expect((yield* history("execution", requestId)).at(-1)).toMatchObject({
        event: "AGENT_REINSTATED",
        from: "completed.held",
        to: "completed.held",
        payload: { by: "bob", reason: "appeal upheld" },
        operator: null
      })
      yield* host.fireDue
      expect((yield* op(`/machines/execution/actors/${requestId}`)).body.data).toMatchObject({ state: "completed.released", summary: { escrowStatus: "released" } })
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.008500", pending: "0.000000" })

      const actions = (yield* op(`/actions?machine=agent&actorId=${agentId}`)).body.data.actions
      // The trust-tier pin of the scenario's registration is an operator decision on record too.
      expect(actions.map((a: { action: string; outcome: string; operator: string }) => `${a.action}:${a.outcome}:${a.operator}`)).toEqual([
        "reinstate:applied:bob",
        "suspend:refused:bob",
        "suspend:applied:alice",
        "pin_trust_tier:applied:test harness"
      ])
      // One per page, following the cursor: the same record.
      const first = (yield* op(`/actions?machine=agent&actorId=${agentId}&limit=1`)).body.data
      const second = (yield* op(`/actions?machine=agent&actorId=${agentId}&limit=3&cursor=${first.pagination.nextCursor}`)).body.data
      expect([...first.actions, ...second.actions]).toEqual(actions)
      expect(second.pagination).toEqual({ limit: 3, hasMore: false, nextCursor: null })
      yield* realNow
      expect((yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "back" } })).status).toBe(200)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a circuit forced open refuses calls (nothing charged) until an operator closes it; both in its history with who and why", () =>
    Effect.gen(function* () {
      yield* realNow
      const agentId = yield* registerAgent(devAccount(2), (yield* fakeAgent("echo")).url, { tier: "premium" })
      const payer = devAccount(8)
      const opened = yield* lever(`/circuits/${agentId}/force`, { state: "open", reason: "agent leaks data" })
      expect(opened.body.data).toMatchObject({ action: "force_circuit_open", machine: "circuit", actorId: agentId, outcome: "applied", from: "closed", to: "open" })
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const refused = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "no" } })
      expect(refused.status).toBe(503)
      expect(refused.body.error).toMatchObject({ code: "AGENT_UNAVAILABLE", details: { forced: true } })
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect((yield* lever(`/circuits/${agentId}/force`, { state: "open", reason: "again" })).body.error?.code).toBe("LEVER_NOT_APPLICABLE")
      expect((yield* op(`/machines/circuit/actors/${agentId}`)).body.data).toMatchObject({ state: "open", snapshot: { context: { forced: true } } })

      const closed = yield* lever(`/circuits/${agentId}/force`, { state: "closed", reason: "fixed" }, "carol")
      expect(closed.body.data).toMatchObject({ action: "force_circuit_closed", outcome: "applied", from: "open", to: "closed" })
      expect((yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "yes" } })).status).toBe(200)
      const transitions = yield* history("circuit", agentId)
      expect(transitions.map((t) => [t.event, t.to, t.operator?.name, t.operator?.reason])).toEqual([
        ["FORCE_OPEN", "open", "alice", "agent leaks data"],
        ["FORCE_CLOSE", "closed", "carol", "fixed"]
      ])
      const actor = (yield* op(`/machines/circuit/actors/${agentId}`)).body.data
      expect(actor.operatorActions.map((a: { outcome: string }) => a.outcome)).toEqual(["applied", "refused", "applied"])
    }))

  it.scoped("a refund that failed on chain (the treasury short) is retried at once: paid once, the execution refunded, ledger equals chain", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
      const agentId = yield* registerAgent(devAccount(3), agent.url, { tier: "premium" })
      const payer = devAccount(9)
      const failed = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "bad output" } })
      expect(failed.status).toBe(502)
      const requestId = String(failed.body.error?.details?.requestId)
      yield* TestClock.adjust(601_000)
      const host = yield* MachineHost
      yield* host.fireDue
      const refunding = (yield* op(`/machines/execution/actors/${requestId}`)).body.data
      expect(refunding).toMatchObject({ state: "refunding", summary: { refundStatus: "pending" } })
      const refundId: string = refunding.summary.refundId

      // Empty the treasury's USDC in the token's storage: the refund transfer is mined and reverts.
      const usdc = inject("usdcAddress")
      const slot = keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [TREASURY, 1n]))
      const held = yield* Effect.promise(() => usdcBalance(TREASURY))
      const setBalance = (value: bigint) =>
        Effect.promise(() => publicClient().request({ method: "anvil_setStorageAt" as never, params: [usdc, slot, pad(toHex(value))] as never }))
      yield* setBalance(0n)
      const refunds = yield* Refunds
      yield* refunds.sendDue
      yield* setBalance(held)
      const waiting = (yield* op(`/machines/execution/actors/${requestId}`)).body.data
      expect(waiting.summary).toMatchObject({ refundStatus: "pending", refundLastError: "transfer reverted or did not pay the refund" })
      const nextTry = waiting.timers.find((t: { event: string }) => t.event === "REFUND_ATTEMPT")
      expect(new Date(nextTry.dueAt).getTime()).toBeGreaterThan(yield* TestClock.currentTimeMillis)
      expect(yield* refunds.sendDue).toBe(0)

      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const retried = yield* lever(`/refunds/${refundId}/retry`, { reason: "treasury topped up" })
      expect(retried.body.data).toMatchObject({ action: "retry_refund", machine: "execution", actorId: requestId, outcome: "applied", from: "refunding", to: "refunding" })
      expect((yield* history("execution", requestId)).at(-1)).toMatchObject({ event: "REFUND_RETRY", operator: { name: "alice", reason: "treasury topped up" } })
      expect(yield* refunds.sendDue).toBe(1)
      expect((yield* op(`/machines/execution/actors/${requestId}`)).body.data).toMatchObject({ state: "refunded", summary: { refundStatus: "confirmed" } })
      expect((yield* Effect.promise(() => usdcBalance(payer.address))) - before).toBe(11_000n)
      const twice = yield* lever(`/refunds/${refundId}/retry`, { reason: "again" })
      expect(twice.body.error).toMatchObject({ code: "LEVER_NOT_APPLICABLE", details: { refundStatus: "confirmed" } })
      expect((yield* lever("/refunds/rfd_nope/retry", { reason: "x" })).body.error?.code).toBe("REFUND_NOT_FOUND")
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a settlement waiting for its backoff after an RPC fault is retried at once: settled on chain once, ledger equals chain", () =>
    Effect.gen(function* () {
      yield* realNow
      const agentId = yield* registerAgent(devAccount(4), (yield* fakeAgent("echo")).url, { tier: "premium" })
      // The process "crashes" before settling: the payment stays reserved, nothing was sent.
      crash.next = true
      const paid = yield* execute(devAccount(7), { targetAgentId: agentId, capabilityId: "echo", input: { text: "unsettled" } })
      const requestId: string = paid.body.data?.requestId ?? paid.body.error?.details?.requestId
      const paymentId: string = (yield* op(`/machines/execution/actors/${requestId}`)).body.data.summary.paymentId
      // The recovery attempt met an RPC fault (what Payments.recordIn records when the chain does not answer): retrying.
      const host = yield* MachineHost
      const now = yield* TestClock.currentTimeMillis
      yield* host.deliverNow("settlement", paymentId, { type: "FAILED_TRANSIENT", at: now, error: "rpc: connection refused" })
      const retrying = (yield* op(`/machines/settlement/actors/${paymentId}`)).body.data
      expect(retrying.state).toBe("retrying")
      expect(retrying.timers).toEqual([expect.objectContaining({ source: "worker", event: "RECOVERY", dueAt: new Date(now + 2_000).toISOString() })])
      const payments = yield* Payments
      expect(yield* payments.recoverDue).toBe(0)

      const retried = yield* lever(`/settlements/${paymentId}/retry`, { reason: "rpc is back" })
      expect(retried.body.data).toMatchObject({ action: "retry_settlement", machine: "settlement", outcome: "applied", from: "retrying", to: "reserved" })
      expect(yield* payments.recoverDue).toBe(1)
      const settled = (yield* op(`/machines/settlement/actors/${paymentId}`)).body.data
      expect(settled).toMatchObject({ state: "settled", timers: [] })
      expect(settled.summary.txHash).toMatch(/^0x[0-9a-f]{64}$/)
      expect((yield* history("settlement", paymentId)).map((t) => `${t.event}→${t.to}${t.operator === null ? "" : ` (${t.operator.name})`}`)).toEqual([
        "RESERVED→reserved",
        "FAILED_TRANSIENT→retrying",
        "RETRY_NOW→reserved (alice)",
        "SETTLED→settled"
      ])
      expect((yield* lever(`/settlements/${paymentId}/retry`, { reason: "again" })).body.error).toMatchObject({ code: "LEVER_NOT_APPLICABLE", details: { state: "settled" } })
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a dead-lettered webhook delivery is requeued by an operator: a new delivery of the same body reaches the receiver; once", () =>
    Effect.gen(function* () {
      yield* realNow
      const owner = devAccount(5)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const statuses = [500]
      const received: Array<string> = []
      const server = yield* Effect.acquireRelease(
        Effect.async<http.Server>((resume) => {
          const s = http.createServer((req, res) => {
            let body = ""
            req.on("data", (c: Buffer) => (body += c.toString("utf8")))
            req.on("end", () => {
              received.push(body)
              res.writeHead(statuses[0] ?? 200).end()
            })
          })
          s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
        }),
        (s) => Effect.sync(() => s.close())
      )
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
      const created = yield* api("/api/v1/webhooks", { json: { agentId, url, events: ["execution.completed"] }, headers: yield* Effect.promise(() => walletAuth(owner, agentId)) })
      const webhookId: string = created.body.data.id
      expect((yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text: "hook" } })).status).toBe(200)
      const dispatcher = yield* Dispatcher
      yield* dispatcher.dispatchDue
      for (let attempt = 0; attempt < 5; attempt++) {
        yield* dispatcher.sendDue
        yield* TestClock.adjust(300_001)
      }
      expect(received).toHaveLength(5)
      const dead = (yield* op("/machines/webhookDelivery?state=dead")).body.data.actors.find((a: any) => a.summary.subscriptionId === webhookId)
      expect(dead.summary).toMatchObject({ attemptCount: "5", requeuedAt: null })

      statuses[0] = 204
      const requeued = yield* lever(`/webhook-deliveries/${dead.id}/requeue`, { reason: "receiver fixed" })
      expect(requeued.body.data).toMatchObject({ action: "requeue_delivery", machine: "webhookDelivery", actorId: dead.id, outcome: "applied", from: "dead" })
      const newId: string = requeued.body.data.details.newDeliveryId
      expect((yield* op(`/machines/webhookDelivery/actors/${newId}`)).body.data).toMatchObject({ state: "pending", summary: { requeuedFrom: dead.id } })
      yield* dispatcher.sendDue
      expect(received).toHaveLength(6)
      expect(received[5]).toBe(received[0])
      expect((yield* op(`/machines/webhookDelivery/actors/${newId}`)).body.data.state).toBe("delivered")

      const twice = yield* lever(`/webhook-deliveries/${dead.id}/requeue`, { reason: "again" })
      expect(twice.body.error?.code).toBe("LEVER_NOT_APPLICABLE")
      const original = (yield* op(`/machines/webhookDelivery/actors/${dead.id}`)).body.data
      expect(original.summary.requeuedAt).not.toBeNull()
      expect(original.operatorActions.map((a: { outcome: string; reason: string }) => `${a.outcome}: ${a.reason}`)).toEqual(["applied: receiver fixed", "refused: again"])
      expect((yield* lever(`/webhook-deliveries/${newId}/requeue`, { reason: "not dead" })).body.error).toMatchObject({ code: "LEVER_NOT_APPLICABLE", details: { state: "delivered" } })
    }))
})
