// Wallet signatures on reads (spec section 5: "a signature expires after 5 minutes"): one signature serves every owner
// read (GET) as often as needed for its 5 minutes; every state-changing call still takes a signature of its own.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { receiver } from "../support/receivers.js"
import { registerAgent } from "../support/scenario.js"

const MINUTE = 60_000

const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, { method: init.method ?? (init.json === undefined ? "GET" : "POST"), ...(init.json === undefined ? {} : { json: init.json }), headers: init.headers ?? {} })))

/** Signed at the service's (test) clock. */
const signedAt = (owner: ReturnType<typeof devAccount>, agentId: string, timestamp: number) =>
  Effect.promise(() => walletAuth(owner, agentId, { timestamp }))

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("wallet signatures on reads", (it) => {
  it.scoped("one signature serves every owner GET, again and again, for 5 minutes, then AUTH_EXPIRED; a change still uses it up", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.now())
      const owner = devAccount(3)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url)
      const hook = yield* receiver([200])
      const created = yield* api("/api/v1/webhooks", { json: { agentId, url: hook.url }, headers: yield* signedAt(owner, agentId, yield* TestClock.currentTimeMillis) })
      expect(created.status, JSON.stringify(created.body)).toBe(201)
      const webhook = created.body.data.id as string

      // Another millisecond than the creation's signature (a used signature is remembered by its signed message).
      const signed = yield* signedAt(owner, agentId, (yield* TestClock.currentTimeMillis) + 1)
      /** Every GET that asks for the owner's wallet signature, with the status it answers to the owner. */
      const reads: ReadonlyArray<readonly [string, number]> = [
        [`/api/v1/payments/history/${agentId}`, 200],
        [`/api/v1/analytics/agent/${agentId}`, 200],
        [`/api/v1/analytics/agent/${agentId}/timeseries?days=2`, 200],
        [`/api/v1/agents/${agentId}/analytics`, 200],
        [`/api/v1/webhooks/agent/${agentId}`, 200],
        [`/api/v1/webhooks/${webhook}/deliveries`, 200],
        [`/api/v1/webhooks/${webhook}/dead-letter`, 200],
        // Past the signature check, the delivery is looked up: none by that id.
        [`/api/v1/webhooks/${webhook}/deliveries/del_none/logs`, 404]
      ]
      const readAll = (headers: Record<string, string>) =>
        Effect.forEach(reads, ([path]) => Effect.map(api(path, { headers }), (r) => [path, r.status, r.body.error?.code ?? null] as const))
      const answered = reads.map(([path, status]) => [path, status, status === 404 ? "NOT_FOUND" : null] as const)

      expect(yield* readAll(signed)).toEqual(answered)
      expect(yield* readAll(signed)).toEqual(answered)
      yield* TestClock.adjust(5 * MINUTE - 1_000)
      expect(yield* readAll(signed)).toEqual(answered)

      // State-changing calls stay single-use, also with a signature that served reads.
      expect((yield* api(`/api/v1/webhooks/${webhook}`, { method: "PATCH", json: { isActive: true }, headers: signed })).status).toBe(200)
      const again = yield* api(`/api/v1/webhooks/${webhook}`, { method: "PATCH", json: { isActive: true }, headers: signed })
      expect({ status: again.status, code: again.body.error?.code }).toEqual({ status: 401, code: "AUTH_SIGNATURE_REUSED" })
      const rotated = yield* api(`/api/v1/webhooks/${webhook}/rotate-secret`, { method: "POST", headers: signed })
      expect(rotated.body.error?.code).toBe("AUTH_SIGNATURE_REUSED")
      const renamed = yield* api(`/api/v1/agents/${agentId}`, { method: "PATCH", json: { name: "Renamed" }, headers: signed })
      expect(renamed.body.error?.code).toBe("AUTH_SIGNATURE_REUSED")
      // Reads go on until the window closes.
      expect(yield* readAll(signed)).toEqual(answered)

      yield* TestClock.adjust(2_000)
      expect(yield* readAll(signed)).toEqual(reads.map(([path]) => [path, 401, "AUTH_EXPIRED"] as const))
      // Someone else's signature is refused on reads as before.
      const stranger = yield* signedAt(devAccount(4), agentId, yield* TestClock.currentTimeMillis)
      expect(yield* readAll(stranger)).toEqual(reads.map(([path]) => [path, 403, "AUTH_WALLET_MISMATCH"] as const))
    }))
})
