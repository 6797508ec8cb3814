// Disputes end to end: payers (x402-fetch) dispute with the X-Client-Id their paid call returned; the money is frozen at
// once; the platform resolves for the client (refund on chain), for the agent (released) or split; an unanswered dispute
// escalates after 48 hours (TestClock, durable timer, once); every limit and auth failure is refused without moving money.
// Afterwards the ledger's treasury equals the chain's, to the micro-USDC.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { MachineHost } from "../../machines/Host.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { call, devAccount, usdcBalance, walletAuth } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { foldOutcomes } from "../support/reputation.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice (0.0015 cut, 0.0085 to the agent)
const HOUR = 60 * 60 * 1000

/** Our clock starts at the real time (payments and signatures are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, {
        method: init.method ?? (init.json === undefined ? "GET" : "POST"),
        ...(init.json === undefined ? {} : { json: init.json }),
        headers: init.headers ?? {}
      })))

const operator = { authorization: `Bearer ${OPERATOR_TOKEN}`, "x-operator": "disputes desk" }

/** One paid call; returns its transaction id and the payer's client id from the response. */
const paidCall = (payer: PrivateKeyAccount, agentId: string, text = "hi") =>
  Effect.gen(function* () {
    const response = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text } })
    expect(response.status).toBe(200)
    const clientId = response.headers.get("x-client-id") ?? ""
    expect(clientId).toMatch(/^cl_[0-9a-f]{40}_/)
    const { sql } = yield* TestEnv
    const [row] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${response.body.data.requestId}`
    return { transactionId: row?.transactionId ?? "", requestId: response.body.data.requestId as string, clientId }
  })

const openDispute = (clientId: string, transactionId: string, body: Record<string, unknown> = {}) =>
  api("/api/v1/disputes", { json: { transactionId, reason: "quality", evidence: "the answer was wrong", ...body }, headers: { "X-Client-Id": clientId } })

const resolve = (id: string, json: Record<string, unknown>) => api(`/api/v1/operator/disputes/${id}/resolve`, { json, headers: operator })

const reputationOf = (agentId: string) =>
  Effect.zipRight(foldOutcomes, Effect.map(api(`/api/v1/agents/${agentId}`), (r) => r.body.data.reputation_score as number))

const escrowStatus = (transactionId: string) => Effect.map(api(`/api/v1/payments/tx/${transactionId}`), (r) => r.body.data.escrow_status as string)

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("disputes", (it) => {
  it.scoped("resolved for the client: a new agent's held earnings are frozen, the payer is refunded the whole price on chain, reputation -5, once", () =>
    Effect.gen(function* () {
      yield* realNow
      const machines = yield* MachineHost
      const treasury = yield* TreasuryWorker
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url)
      const payer = devAccount(2)
      const tx = yield* paidCall(payer, agentId)
      const paidBalance = yield* Effect.promise(() => usdcBalance(payer.address))

      const opened = yield* openDispute(tx.clientId, tx.transactionId)
      expect(opened.status).toBe(201)
      expect(opened.body.data).toMatchObject({ transactionId: tx.transactionId, agentId, reason: "quality", status: "open" })
      expect(opened.body.data.message).toMatch(/48 hours/)
      const id: string = opened.body.data.disputeId
      expect(yield* escrowStatus(tx.transactionId)).toBe("disputed")
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ pending: "0.000000", totalDisputed: "0.008500", available: "0.000000" })

      // The 24-hour release no longer happens: the money stays frozen.
      yield* TestClock.adjust(25 * HOUR)
      yield* machines.fireDue
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.000000", totalDisputed: "0.008500" })

      const before = yield* reputationOf(agentId)
      const resolved = yield* resolve(id, { resolution: "resolved_client", notes: "output did not match the request" })
      expect(resolved.status).toBe(200)
      expect(resolved.body.data).toMatchObject({ status: "resolved_client", client_refund: "0.011000", resolved_by: "operator" })
      yield* treasury.processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(paidBalance + PRICE)
      expect(yield* reputationOf(agentId)).toBe(before - 5)
      expect(yield* escrowStatus(tx.transactionId)).toBe("refunded")
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.000000", totalDisputed: "0.000000", totalEarned: "0.000000" })

      // Resolving again is refused and moves nothing.
      const again = yield* resolve(id, { resolution: "resolved_agent" })
      expect(again.status).toBe(409)
      expect(again.body.error?.code).toBe("DISPUTE_CLOSED")
      yield* treasury.processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(paidBalance + PRICE)

      const timeline = yield* api(`/api/v1/disputes/${id}/timeline`)
      expect(timeline.body.data.timeline.map((t: { event_type: string }) => t.event_type)).toEqual(["opened", "resolved"])
      expect(timeline.body.data.timeline[0].details).toEqual({ transactionId: tx.transactionId, reason: "quality", hasEvidence: true })
      const { sql } = yield* TestEnv
      const events = yield* sql<{ eventType: string }>`SELECT event_type FROM outbox_events WHERE payload->>'disputeId' = ${id} ORDER BY created_at`
      expect(events.map((e) => e.eventType)).toEqual(["escrow.disputed", "dispute.opened", "dispute.resolved"])
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("resolved for the agent: an instant agent's released earnings are taken back while open and returned, reputation +2", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), agent.url, { tier: "premium" })
      const tx = yield* paidCall(devAccount(4), agentId)
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.008500", totalEarned: "0.008500" })

      const opened = yield* openDispute(tx.clientId, tx.requestId, { reason: "non_delivery", evidence: undefined })
      expect(opened.status).toBe(201)
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.000000", totalDisputed: "0.008500", totalEarned: "0.000000" })

      const before = yield* reputationOf(agentId)
      const resolved = yield* resolve(opened.body.data.disputeId, { resolution: "resolved_agent", notes: "delivered as specified" })
      expect(resolved.body.data).toMatchObject({ status: "resolved_agent", client_refund: "0.000000" })
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.008500", totalDisputed: "0.000000", totalEarned: "0.008500" })
      expect(yield* reputationOf(agentId)).toBe(before + 2)
      expect(yield* escrowStatus(tx.transactionId)).toBe("released")
      const list = yield* api(`/api/v1/disputes/agent/${agentId}`)
      expect(list.body.data.summary).toEqual({ total: 1, open: 0, won: 1, lost: 0 })
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a split refunds the client its share on chain and releases the rest in proportion; reputation unchanged", () =>
    Effect.gen(function* () {
      yield* realNow
      const treasury = yield* TreasuryWorker
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(5), agent.url, { tier: "premium" })
      const payer = devAccount(6)
      const tx = yield* paidCall(payer, agentId)
      const paidBalance = yield* Effect.promise(() => usdcBalance(payer.address))
      const opened = yield* openDispute(tx.clientId, tx.transactionId, { reason: "overcharge" })
      const before = yield* reputationOf(agentId)
      const resolved = yield* resolve(opened.body.data.disputeId, { resolution: "resolved_split", clientShareBps: 2_500 })
      // 25% of 0.011000 back; of the 0.008250 kept, the platform's 2500/11000 (0.001875) and the agent's 0.006375.
      expect(resolved.body.data).toMatchObject({ status: "resolved_split", client_refund: "0.002750" })
      yield* treasury.processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(paidBalance + 2_750n)
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.006375", totalDisputed: "0.000000" })
      expect(yield* reputationOf(agentId)).toBe(before)
      const invalid = yield* resolve(opened.body.data.disputeId, { resolution: "resolved_split", clientShareBps: 10_000 })
      expect(invalid.status).toBe(400)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("an unanswered dispute escalates after 48 hours exactly once; an answered one stays open", () =>
    Effect.gen(function* () {
      yield* realNow
      const machines = yield* MachineHost
      const agent = yield* fakeAgent("echo")
      const owner = devAccount(7)
      const agentId = yield* registerAgent(owner, agent.url, { tier: "premium" })
      const payer = devAccount(8)
      const first = yield* paidCall(payer, agentId, "one")
      const second = yield* paidCall(payer, agentId, "two")
      const unanswered: string = (yield* openDispute(first.clientId, first.transactionId)).body.data.disputeId
      const answered: string = (yield* openDispute(second.clientId, second.transactionId)).body.data.disputeId

      // The agent answers one of them, with its owner's wallet signature (a bare wallet header is not enough).
      const bare = yield* api(`/api/v1/disputes/${answered}/respond`, { json: { response: "it was correct" }, headers: { "X-Agent-Wallet": owner.address } })
      expect(bare.status).toBe(401)
      const auth = yield* Effect.promise(() => walletAuth(owner, agentId))
      const responded = yield* api(`/api/v1/disputes/${answered}/respond`, { json: { response: "it was correct" }, headers: auth })
      expect(responded.status).toBe(200)
      const twice = yield* api(`/api/v1/disputes/${answered}/respond`, { json: { response: "again" }, headers: yield* Effect.promise(() => walletAuth(owner, agentId)) })
      expect(twice.body.error?.code).toBe("DISPUTE_ALREADY_RESPONDED")

      yield* TestClock.adjust(48 * HOUR - 60_000)
      yield* machines.fireDue
      expect((yield* api(`/api/v1/disputes/${unanswered}`)).body.data.status).toBe("open")
      yield* TestClock.adjust(61_000)
      yield* machines.fireDue
      yield* TestClock.adjust(HOUR)
      yield* machines.fireDue
      const escalated = (yield* api(`/api/v1/disputes/${unanswered}`)).body.data
      expect(escalated).toMatchObject({ status: "escalated", escalation_reason: "no agent response within 48 hours" })
      expect(escalated.escalated_at).not.toBeNull()
      const timeline = (yield* api(`/api/v1/disputes/${unanswered}/timeline`)).body.data.timeline.map((t: { event_type: string }) => t.event_type)
      expect(timeline).toEqual(["opened", "escalated"])
      const other = (yield* api(`/api/v1/disputes/${answered}`)).body.data
      expect(other).toMatchObject({ status: "open", agent_response: "it was correct" })

      // An escalated dispute is still resolved by the platform.
      const resolved = yield* resolve(unanswered, { resolution: "resolved_agent" })
      expect(resolved.body.data.status).toBe("resolved_agent")
      const queue = yield* api("/api/v1/operator/disputes?status=open", { headers: operator })
      expect(queue.body.data.disputes.map((d: { id: string }) => d.id)).toContain(answered)
      expect(queue.body.data.pagination).toMatchObject({ limit: 20, offset: 0 })
      expect((yield* api("/api/v1/operator/disputes")).status).toBe(401)
    }))

  it.scoped("who may dispute, and the limits: client id bound to the payer, one per transaction, evidence, window, rate", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent("echo")
      const owner = devAccount(9)
      const agentId = yield* registerAgent(owner, agent.url, { tier: "premium" })
      const payer = devAccount(5) // no dispute history in this file (the rate rule below counts them)
      const tx = yield* paidCall(payer, agentId)
      const stranger = yield* paidCall(devAccount(4), agentId)

      const missing = yield* api("/api/v1/disputes", { json: { transactionId: tx.transactionId, reason: "quality" } })
      expect({ status: missing.status, code: missing.body.error?.code }).toEqual({ status: 401, code: "CLIENT_ID_REQUIRED" })
      // A well-formed id for the payer's wallet that we did not issue.
      const forged = `cl_${payer.address.slice(2).toLowerCase()}_${"A".repeat(22)}`
      expect((yield* openDispute(forged, tx.transactionId)).body.error?.code).toBe("CLIENT_ID_REQUIRED")
      expect((yield* openDispute(stranger.clientId, tx.transactionId)).body.error?.code).toBe("NOT_TRANSACTION_PAYER")
      expect((yield* openDispute(tx.clientId, "tx_nope")).status).toBe(404)
      for (const body of [{ reason: "bad" }, { evidence: "e".repeat(2001) }, { transactionId: 42 }]) {
        const refused = yield* openDispute(tx.clientId, tx.transactionId, body)
        expect(refused.body.error?.code).toBe("VALIDATION_ERROR")
      }
      expect((yield* balanceOf(agentId)).body.data.totalDisputed).toBe("0.000000")

      const opened = yield* openDispute(tx.clientId, tx.transactionId)
      expect(opened.status).toBe(201)
      const id: string = opened.body.data.disputeId
      const duplicate = yield* openDispute(tx.clientId, tx.transactionId)
      expect({ status: duplicate.status, code: duplicate.body.error?.code, id: duplicate.body.error?.details?.disputeId }).toEqual({ status: 409, code: "DISPUTE_EXISTS", id })

      // Evidence: the client with its id, the agent with a signature; 10 each.
      for (let i = 0; i < 10; i++) {
        const added = yield* api(`/api/v1/disputes/${id}/evidence`, { json: { evidenceType: "text", content: `item ${i}` }, headers: { "X-Client-Id": tx.clientId } })
        expect(added.status).toBe(201)
      }
      const eleventh = yield* api(`/api/v1/disputes/${id}/evidence`, { json: { evidenceType: "text", content: "one more" }, headers: { "X-Client-Id": tx.clientId } })
      expect(eleventh.body.error?.code).toBe("EVIDENCE_LIMIT_REACHED")
      const asOther = yield* api(`/api/v1/disputes/${id}/evidence`, { json: { evidenceType: "text", content: "me too" }, headers: { "X-Client-Id": stranger.clientId } })
      expect(asOther.body.error?.code).toBe("NOT_TRANSACTION_PAYER")
      const bareAgent = yield* api(`/api/v1/disputes/${id}/evidence`, { json: { evidenceType: "url", content: "https://example.com/log" }, headers: { "X-Agent-Wallet": owner.address } })
      expect(bareAgent.status).toBe(401)
      const agentUrl = yield* api(`/api/v1/disputes/${id}/evidence`, {
        json: { evidenceType: "url", content: "https://example.com/log", metadata: { kind: "log" } },
        headers: yield* Effect.promise(() => walletAuth(owner, agentId))
      })
      expect(agentUrl.body.data).toMatchObject({ submittedBy: "agent", evidenceType: "url" })
      const notUrl = yield* api(`/api/v1/disputes/${id}/evidence`, { json: { evidenceType: "url", content: "not a url" }, headers: { "X-Client-Id": tx.clientId } })
      expect(notUrl.status).toBe(400)
      const evidence = (yield* api(`/api/v1/disputes/${id}/evidence`)).body.data.evidence
      expect(evidence).toHaveLength(11)
      expect(evidence.at(-1)).toMatchObject({ submitted_by: "agent", evidence_type: "url", metadata: { kind: "log" } })

      // The rate rule: two disputes are always heard; a third with 3 paid transactions is 100% > 20%.
      const second = yield* paidCall(payer, agentId, "second")
      const third = yield* paidCall(payer, agentId, "third")
      expect((yield* openDispute(second.clientId, second.transactionId)).status).toBe(201)
      const rate = yield* openDispute(third.clientId, third.transactionId)
      expect({ status: rate.status, code: rate.body.error?.code }).toEqual({ status: 403, code: "DISPUTE_RATE_EXCEEDED" })

      // After 24 hours the transaction can no longer be disputed.
      const late = yield* paidCall(devAccount(4), agentId, "late")
      yield* TestClock.adjust(24 * HOUR + 1_000)
      const closed = yield* openDispute(late.clientId, late.transactionId)
      expect(closed.body.error?.code).toBe("DISPUTE_WINDOW_CLOSED")
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("concurrent duplicates: one dispute per transaction, one resolution, one refund", () =>
    Effect.gen(function* () {
      yield* realNow
      const treasury = yield* TreasuryWorker
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(2), agent.url, { tier: "premium" })
      const payer = devAccount(6)
      const tx = yield* paidCall(payer, agentId, "race")
      const paidBalance = yield* Effect.promise(() => usdcBalance(payer.address))
      const filings = yield* Effect.all(Array.from({ length: 6 }, () => openDispute(tx.clientId, tx.transactionId)), { concurrency: "unbounded" })
      expect(filings.map((f) => f.status).sort()).toEqual([201, 409, 409, 409, 409, 409])
      const id: string = filings.find((f) => f.status === 201)?.body.data.disputeId
      const resolutions = yield* Effect.all(Array.from({ length: 4 }, () => resolve(id, { resolution: "resolved_client" })), { concurrency: "unbounded" })
      expect(resolutions.map((r) => r.status).sort()).toEqual([200, 409, 409, 409])
      yield* treasury.processDue
      yield* treasury.processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(paidBalance + PRICE)
      const { sql } = yield* TestEnv
      expect(yield* sql`SELECT id FROM refunds WHERE execution_id = ${tx.requestId}`).toHaveLength(1)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a client files at most 10 disputes per calendar month (with enough paid transactions for the rate rule)", () =>
    Effect.gen(function* () {
      yield* realNow
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(4), agent.url, { tier: "premium" })
      const payer = devAccount(3)
      const calls = yield* Effect.all(Array.from({ length: 55 }, (_, i) => paidCall(payer, agentId, `m${i}`)), { concurrency: 8 })
      for (const tx of calls.slice(0, 10)) expect((yield* openDispute(tx.clientId, tx.transactionId)).status).toBe(201)
      const eleventh = yield* openDispute(calls[10]!.clientId, calls[10]!.transactionId)
      expect({ status: eleventh.status, code: eleventh.body.error?.code }).toEqual({ status: 429, code: "DISPUTE_LIMIT_REACHED" })
      expect((yield* balanceOf(agentId)).body.data.totalDisputed).toBe("0.085000")
    }), { timeout: 60_000 })
})
