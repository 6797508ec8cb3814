// Issue 24 #6: an operator's pause is the operator's to lift. The owner's PATCH {status:"active"} (or a DELETE first, to
// make the pause look like its own) does not undo it; the agent's resource says who paused it and why; the owner's own
// pause and resume, and its edits of everything else, work as before.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"

const send = (method: string, path: string, json?: unknown, headers: Record<string, string> = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() => call(`${baseUrl}${path}`, { method, headers, ...(json === undefined ? {} : { json }) })))

const operatorSets = (agentId: string, status: "active" | "inactive" | "suspended", reason: string) =>
  send("POST", `/api/v1/operator/agents/${agentId}/status`, { status, reason }, { authorization: `Bearer ${OPERATOR_TOKEN}`, "x-operator": "trust desk" })

/** The owner's signed request (a fresh signature each time). */
const asOwner = (owner: number, agentId: string, method: "PATCH" | "DELETE", json?: unknown) =>
  Effect.flatMap(Effect.promise(() => walletAuth(devAccount(owner), agentId)), (headers) => send(method, `/api/v1/agents/${agentId}`, json, headers))

const agentView = (agentId: string) => Effect.map(send("GET", `/api/v1/agents/${agentId}`), (r) => r.body.data)

/** An agent owned by dev account `owner` (one agent per wallet: one owner per test). */
const newAgent = (owner: number) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(Date.now())
    return yield* registerAgent(devAccount(owner), (yield* fakeAgent("echo")).url)
  })

const REASON = "answers with other agents' data; paused while we look into it"

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { timeout: 120_000 })("operator pause", (it) => {
  it.scoped("attack: after an operator's pause, the owner's PATCH {status: active} is AGENT_PAUSED_BY_OPERATOR and the agent stays paused", () =>
    Effect.gen(function* () {
      const agentId = yield* newAgent(1)
      expect((yield* operatorSets(agentId, "inactive", REASON)).status).toBe(200)
      const undone = yield* asOwner(1, agentId, "PATCH", { status: "active" })
      expect(undone.status).toBe(403)
      expect(undone.body.error).toMatchObject({ code: "AGENT_PAUSED_BY_OPERATOR", details: { setBy: "operator", reason: REASON } })
      expect((yield* agentView(agentId)).status).toBe("inactive")
      // Nor by pausing it "itself" first: the pause stays the operator's.
      expect((yield* asOwner(1, agentId, "DELETE")).status).toBe(200)
      expect((yield* asOwner(1, agentId, "PATCH", { status: "active" })).body.error?.code).toBe("AGENT_PAUSED_BY_OPERATOR")
      expect(yield* agentView(agentId)).toMatchObject({ status: "inactive", status_set_by: "operator", status_reason: REASON })
    }))

  it.scoped("the owner sees who paused the agent and why, may still edit the rest, and an operator's reinstatement makes it active", () =>
    Effect.gen(function* () {
      const agentId = yield* newAgent(2)
      expect(yield* agentView(agentId)).toMatchObject({ status: "active", status_set_by: "owner", status_reason: null })
      yield* operatorSets(agentId, "inactive", REASON)
      expect(yield* agentView(agentId)).toMatchObject({ status: "inactive", status_set_by: "operator", status_reason: REASON })
      const renamed = yield* asOwner(2, agentId, "PATCH", { name: "Renamed while paused", status: "inactive" })
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200)
      expect(yield* agentView(agentId)).toMatchObject({ name: "Renamed while paused", status: "inactive", status_set_by: "operator", status_reason: REASON })
      expect((yield* operatorSets(agentId, "active", "checked: fine")).status).toBe(200)
      expect(yield* agentView(agentId)).toMatchObject({ status: "active", status_set_by: "operator", status_reason: null })
      // Active again, the owner pauses and resumes as before.
      expect((yield* asOwner(2, agentId, "PATCH", { status: "inactive" })).status).toBe(200)
      expect(yield* agentView(agentId)).toMatchObject({ status: "inactive", status_set_by: "owner", status_reason: null })
      expect((yield* asOwner(2, agentId, "PATCH", { status: "active" })).status).toBe(200)
      expect((yield* agentView(agentId)).status).toBe("active")
    }))

  it.scoped("the owner's own pause (DELETE or PATCH) is the owner's to lift; a suspension stays the platform's (AGENT_SUSPENDED)", () =>
    Effect.gen(function* () {
      const agentId = yield* newAgent(3)
      expect((yield* asOwner(3, agentId, "DELETE")).body.data).toEqual({ id: agentId, status: "inactive" })
      expect((yield* agentView(agentId)).status_set_by).toBe("owner")
      expect((yield* asOwner(3, agentId, "PATCH", { status: "active" })).status).toBe(200)
      expect((yield* agentView(agentId)).status).toBe("active")
      yield* operatorSets(agentId, "suspended", "terms violation")
      expect(yield* agentView(agentId)).toMatchObject({ status: "suspended", status_set_by: "operator", status_reason: "terms violation" })
      expect((yield* asOwner(3, agentId, "PATCH", { status: "active" })).body.error?.code).toBe("AGENT_SUSPENDED")
    }))

  it.scoped("an operator can make the owner's own pause the operator's: then the owner cannot lift it", () =>
    Effect.gen(function* () {
      const agentId = yield* newAgent(4)
      expect((yield* asOwner(4, agentId, "PATCH", { status: "inactive" })).status).toBe(200)
      const taken = yield* operatorSets(agentId, "inactive", REASON)
      expect(taken.status, JSON.stringify(taken.body)).toBe(200)
      expect(yield* agentView(agentId)).toMatchObject({ status: "inactive", status_set_by: "operator", status_reason: REASON })
      expect((yield* asOwner(4, agentId, "PATCH", { status: "active" })).body.error?.code).toBe("AGENT_PAUSED_BY_OPERATOR")
      // A second operator pause changes nothing and is recorded as refused.
      expect((yield* operatorSets(agentId, "inactive", "again")).body.error?.code).toBe("LEVER_NOT_APPLICABLE")
    }))
})
