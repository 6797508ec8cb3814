// Operator decisions outside the machine levers are recorded like them, through real HTTP: a trust-tier pin (X-Operator
// and a reason required) is on the agent's audit list with the tier before and after; a dispute resolution is on the
// dispute's history with who and why, and a refused second resolution is on record too, nothing moved twice.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))
const AUTH = { authorization: `Bearer ${OPERATOR_TOKEN}` }

const api = (path: string, init: { json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, { method: init.json === undefined ? "GET" : "POST", headers: init.headers ?? {}, ...(init.json === undefined ? {} : { json: init.json }) })))
const op = (path: string) => api(`/api/v1/operator${path}`, { headers: AUTH })
const post = (path: string, json: Record<string, unknown>, name: string | null = "dana") =>
  api(`/api/v1/operator${path}`, { json, headers: name === null ? AUTH : { ...AUTH, "x-operator": name } })
const actionsOf = (machine: string, id: string) =>
  Effect.map(op(`/actions?machine=${machine}&actorId=${id}`), (r) => r.body.data.actions as Array<Record<string, unknown>>)

layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }))("operator decisions on record", (it) => {
  it.scoped("a trust-tier pin needs X-Operator and a reason, and is recorded with the tier before and after", () =>
    Effect.gen(function* () {
      yield* realNow
      const agentId = yield* registerAgent(devAccount(2), (yield* fakeAgent("echo")).url)
      const anonymous = yield* post(`/agents/${agentId}/trust-tier`, { tier: "premium", reason: "vetted" }, null)
      expect(anonymous.status).toBe(400)
      expect(anonymous.body.error?.code).toBe("VALIDATION_ERROR")
      const reasonless = yield* post(`/agents/${agentId}/trust-tier`, { tier: "premium" })
      expect(reasonless.status).toBe(400)
      expect((yield* api(`/api/v1/agents/${agentId}`)).body.data.trustTier).toBe("new")
      expect(yield* actionsOf("agent", agentId)).toEqual([])

      const pinned = yield* post(`/agents/${agentId}/trust-tier`, { tier: "premium", reason: "vetted partner" })
      expect(pinned.status).toBe(200)
      expect(pinned.body.data).toMatchObject({ id: agentId, trustTier: "premium" })
      const unpinned = yield* post(`/agents/${agentId}/trust-tier`, { tier: null, reason: "partnership ended" }, "erin")
      expect(unpinned.body.data).toMatchObject({ trustTier: "new" })
      expect(yield* actionsOf("agent", agentId)).toMatchObject([
        { action: "unpin_trust_tier", operator: "erin", reason: "partnership ended", outcome: "applied", from: "premium", to: "new", details: { pinned: null, previousPin: "premium" } },
        { action: "pin_trust_tier", operator: "dana", reason: "vetted partner", outcome: "applied", from: "new", to: "premium", details: { pinned: "premium", previousPin: null } }
      ])
    }))

  it.scoped("a dispute resolution is in the dispute's history with who and why; resolving it again is refused and on record", () =>
    Effect.gen(function* () {
      yield* realNow
      const agentId = yield* registerAgent(devAccount(1), (yield* fakeAgent("echo")).url)
      const paid = yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text: "disputed" } })
      expect(paid.status).toBe(200)
      const { sql } = yield* TestEnv
      const [row] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${paid.body.data.requestId}`
      const opened = yield* api("/api/v1/disputes", {
        json: { transactionId: row?.transactionId, reason: "quality", evidence: "wrong answer" },
        headers: { "X-Client-Id": paid.headers.get("x-client-id") ?? "" }
      })
      expect(opened.status).toBe(201)
      const disputeId: string = opened.body.data.disputeId

      const anonymous = yield* post(`/disputes/${disputeId}/resolve`, { resolution: "resolved_client" }, null)
      expect(anonymous.status).toBe(400)
      expect((yield* op(`/machines/dispute/actors/${disputeId}`)).body.data.state).toBe("open")

      const resolved = yield* post(`/disputes/${disputeId}/resolve`, { resolution: "resolved_client", notes: "the output ignored the input" })
      expect(resolved.status).toBe(200)
      // The public record names the platform, not the person.
      expect(resolved.body.data).toMatchObject({ status: "resolved_client", resolved_by: "operator" })
      const transitions = (yield* op(`/machines/dispute/actors/${disputeId}/history`)).body.data.transitions as Array<any>
      expect(transitions.find((t) => t.event === "RESOLVE")).toMatchObject({
        from: "open",
        operator: { name: "dana", action: "resolve_dispute", reason: "the output ignored the input" }
      })

      const again = yield* post(`/disputes/${disputeId}/resolve`, { resolution: "resolved_agent" }, "erin")
      expect(again.status).toBe(409)
      expect(again.body.error?.code).toBe("DISPUTE_CLOSED")
      const actor = (yield* op(`/machines/dispute/actors/${disputeId}`)).body.data
      expect(actor.operatorActions).toMatchObject([
        { action: "resolve_dispute", operator: "dana", outcome: "applied", from: "open", details: { resolution: "resolved_client" } },
        { action: "resolve_dispute", operator: "erin", outcome: "refused", to: null, reason: "resolved_agent", details: { resolution: "resolved_agent" } }
      ])
      expect(actor.state).toBe("resolved_client")
    }))
})
