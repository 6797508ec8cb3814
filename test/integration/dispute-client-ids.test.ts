// Issue 24 #4: no view shows a client's X-Client-Id (a bearer credential that files disputes and evidence and never
// expires). The public dispute view names the client by a handle (`clh_` + sha256 of its id) that authorises nothing:
// an outsider who read it cannot open a dispute on the client's other transaction nor add evidence as the client, while
// the client keeps doing both with the X-Client-Id its paid call returned.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createHash } from "node:crypto"
import type { PrivateKeyAccount } from "viem/accounts"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const api = (path: string, init: { json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, { method: init.json === undefined ? "GET" : "POST", ...(init.json === undefined ? {} : { json: init.json }), headers: init.headers ?? {} })))

/** One paid call: its transaction id and the X-Client-Id its response gave the payer. */
const paidCall = (payer: PrivateKeyAccount, agentId: string) =>
  Effect.gen(function* () {
    const response = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "hi" } })
    expect(response.status).toBe(200)
    const { sql } = yield* TestEnv
    const [row] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${response.body.data.requestId}`
    return { transactionId: row?.transactionId ?? "", clientId: response.headers.get("x-client-id") ?? "" }
  })

const openDispute = (clientId: string, transactionId: string) =>
  api("/api/v1/disputes", { json: { transactionId, reason: "quality", evidence: "wrong answer" }, headers: { "X-Client-Id": clientId } })

const addEvidence = (clientId: string, disputeId: string, content: string) =>
  api(`/api/v1/disputes/${disputeId}/evidence`, { json: { evidenceType: "text", content }, headers: { "X-Client-Id": clientId } })

const escrowStatus = (transactionId: string) => Effect.map(api(`/api/v1/payments/tx/${transactionId}`), (r) => r.body.data.escrow_status as string)

/** An agent (owner dev account `owner`, a new one per test: one agent per wallet) and two calls paid by `payer`. */
const twoPaidCalls = (owner: number, payer: number) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(Date.now())
    const agent = yield* fakeAgent("echo")
    const agentId = yield* registerAgent(devAccount(owner), agent.url)
    const first = yield* paidCall(devAccount(payer), agentId)
    const second = yield* paidCall(devAccount(payer), agentId)
    expect(first.clientId).toMatch(/^cl_[0-9a-f]{40}_[A-Za-z0-9_-]{22}$/)
    expect(second.clientId).toBe(first.clientId)
    return { agentId, first, second, clientId: first.clientId }
  })

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { timeout: 120_000 })("client ids in views", (it) => {
  it.scoped("attack: the client_id of the public dispute view opens no dispute on the client's other transaction and adds no evidence as the client", () =>
    Effect.gen(function* () {
      const { first, second } = yield* twoPaidCalls(1, 2)
      const opened = yield* openDispute(first.clientId, first.transactionId)
      expect(opened.status).toBe(201)
      const disputeId: string = opened.body.data.disputeId

      // An outsider reads the public view...
      const shown: string = (yield* api(`/api/v1/disputes/${disputeId}`)).body.data.client_id
      // ...and tries it as the client's credential.
      const second_ = yield* openDispute(shown, second.transactionId)
      expect(second_.status).toBe(401)
      expect(second_.body.error?.code).toBe("CLIENT_ID_REQUIRED")
      expect(yield* escrowStatus(second.transactionId)).not.toBe("disputed")
      const evidence = yield* addEvidence(shown, disputeId, "planted by an outsider")
      expect(evidence.status).toBe(401)
      expect(evidence.body.error?.code).toBe("CLIENT_ID_REQUIRED")
      const listed = (yield* api(`/api/v1/disputes/${disputeId}/evidence`)).body.data.evidence
      expect(listed).toEqual([])
    }))

  it.scoped("no dispute view shows the X-Client-Id: the public view and the operators' list show its handle clh_ + sha256(id)", () =>
    Effect.gen(function* () {
      const { first, clientId } = yield* twoPaidCalls(3, 4)
      const disputeId: string = (yield* openDispute(clientId, first.transactionId)).body.data.disputeId
      const handle = `clh_${createHash("sha256").update(clientId).digest("hex").slice(0, 32)}`
      const tag = clientId.split("_")[2] ?? "-"

      const view = yield* api(`/api/v1/disputes/${disputeId}`)
      expect(view.body.data.client_id).toBe(handle)
      const operatorList = yield* api("/api/v1/operator/disputes", { headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "x-operator": "desk" } })
      expect(operatorList.status).toBe(200)
      const mine = operatorList.body.data.disputes.find((d: { id: string }) => d.id === disputeId)
      expect(mine.client_id).toBe(handle)
      for (const path of [`/api/v1/disputes/${disputeId}`, `/api/v1/disputes/${disputeId}/timeline`, `/api/v1/disputes/${disputeId}/evidence`]) {
        expect(JSON.stringify((yield* api(path)).body)).not.toContain(tag)
      }
      expect(JSON.stringify(operatorList.body)).not.toContain(tag)
    }))

  it.scoped("the client keeps filing disputes and evidence with the X-Client-Id its paid call returned", () =>
    Effect.gen(function* () {
      const { first, second, clientId } = yield* twoPaidCalls(5, 6)
      const a = yield* openDispute(clientId, first.transactionId)
      expect(a.status).toBe(201)
      const b = yield* openDispute(clientId, second.transactionId)
      expect(b.status).toBe(201)
      expect(yield* escrowStatus(second.transactionId)).toBe("disputed")
      const added = yield* addEvidence(clientId, b.body.data.disputeId, "the output was empty")
      expect(added.status).toBe(201)
      expect(added.body.data).toMatchObject({ submittedBy: "client", evidenceType: "text" })
    }))
})
