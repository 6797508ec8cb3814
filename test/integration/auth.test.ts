import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { call, devAccount, paidCall, walletAuth } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"

const owner = devAccount(6)
/** A funded dev wallet that does not own the agent. */
const intruder = devAccount(1)
const MINUTE = 60_000

type Response = Awaited<ReturnType<typeof call>>

const expectError = (response: Response, status: number, code: string) => {
  expect({ status: response.status, code: response.body.error?.code }).toEqual({ status, code })
  expect(response.body.success).toBe(false)
  expect(typeof response.body.error?.message).toBe("string")
}

// It sends wrong operator tokens on purpose: the failed-attempt throttle (operator-token-limit.test.ts) is set out of its way.
layer(TestApp({ OPS_LOGIN_MAX_FAILURES: "1000" }), { excludeTestServices: true })("wallet-signature and operator authentication", (it) => {
  /** The agent under test, registered (and paid for) once by its owner on first use. */
  let registered: Promise<string> | undefined
  const agentId = Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    registered ??= paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner) }).then((response) => {
      if (response.status !== 201) throw new Error(`registration failed: ${response.status} ${JSON.stringify(response.body)}`)
      return response.body.data.id as string
    })
    return yield* Effect.promise(() => registered!)
  })

  const patch = (id: string, headers: Record<string, string>, json: unknown = { name: "Hijacked" }) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`, { method: "PATCH", headers, json })))
  const remove = (id: string, headers: Record<string, string>) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`, { method: "DELETE", headers })))
  const read = (id: string) => Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`)))
  /** Both owner-only endpoints, which must refuse the same headers the same way. */
  const both = (id: string, headers: Record<string, string>) => Effect.all([patch(id, headers), remove(id, headers)])
  const sign = (...args: Parameters<typeof walletAuth>) => Effect.promise(() => walletAuth(...args))
  const operator = (path: string, json: unknown, headers: Record<string, string> = { Authorization: `Bearer ${OPERATOR_TOKEN}`, "X-Operator": "auth test" }) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) =>
      Effect.promise(() => call(`${baseUrl}/api/v1/operator${path}`, { method: "POST", json, headers })))

  it.effect("PATCH and DELETE without the wallet headers are refused with 401 AUTH_REQUIRED", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const valid = yield* sign(owner, id)
      for (
        const headers of [
          {},
          { "X-Agent-Wallet": valid["X-Agent-Wallet"] },
          { "X-Agent-Signature": valid["X-Agent-Signature"] },
          { "X-Agent-Wallet": "", "X-Agent-Signature": valid["X-Agent-Signature"] },
          { "X-Agent-Wallet": valid["X-Agent-Wallet"], "X-Agent-Signature": "" }
        ]
      ) {
        for (const response of yield* both(id, headers)) expectError(response, 401, "AUTH_REQUIRED")
      }
    }))

  it.effect("a signature header not of the form service-auth:{id}:{ms}:sig:{0x hex} is refused with 401 AUTH_MALFORMED", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const valid = yield* sign(owner, id)
      const signature = valid["X-Agent-Signature"]
      const [message, hex] = signature.split(":sig:") as [string, string]
      const malformed = [
        message, // no :sig: part
        `${message}:${hex}`, // wrong separator
        `${message}:sig:0x${"zz".repeat(65)}`, // not hex
        `${message}:sig:${hex.slice(2)}`, // no 0x prefix
        `${message}:sig:${hex.slice(0, -2)}`, // 64 bytes, not 65
        `service-auth:${id}:yesterday:sig:${hex}`, // timestamp not a number
        `service-auth:not-a-uuid:${Date.now()}:sig:${hex}`,
        `other-auth:${id}:${Date.now()}:sig:${hex}`,
        `${signature}:sig:${hex}`
      ]
      for (const bad of malformed) {
        for (const response of yield* both(id, { "X-Agent-Wallet": owner.address, "X-Agent-Signature": bad })) {
          expectError(response, 401, "AUTH_MALFORMED")
        }
      }
      // A wallet header that is not an address is malformed too, even with a good signature.
      for (const wallet of ["0x123", "owner", `${owner.address}00`]) {
        for (const response of yield* both(id, { "X-Agent-Wallet": wallet, "X-Agent-Signature": signature })) {
          expectError(response, 401, "AUTH_MALFORMED")
        }
      }
    }))

  it.effect("a timestamp in seconds instead of milliseconds is well-formed but expired: 401 AUTH_EXPIRED", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const headers = yield* sign(owner, id, { timestamp: Math.floor(Date.now() / 1000) })
      for (const response of yield* both(id, headers)) expectError(response, 401, "AUTH_EXPIRED")
    }))

  it.effect("a signature 6 minutes old is refused with 401 AUTH_EXPIRED; one 4m50s old is still accepted", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const stale = yield* sign(owner, id, { timestamp: Date.now() - 6 * MINUTE })
      for (const response of yield* both(id, stale)) expectError(response, 401, "AUTH_EXPIRED")
      expect((yield* read(id)).body.data.name).toBe("Summarizer")

      const recent = yield* sign(owner, id, { timestamp: Date.now() - (4 * MINUTE + 50_000) })
      const accepted = yield* patch(id, recent, { description: "signed 4m50s ago" })
      expect(accepted.status).toBe(200)
      expect(accepted.body.data.description).toBe("signed 4m50s ago")
    }))

  it.effect("a timestamp 2 minutes in the future is refused with 401 AUTH_FUTURE_TIMESTAMP; 10 s of clock skew is tolerated", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const future = yield* sign(owner, id, { timestamp: Date.now() + 2 * MINUTE })
      for (const response of yield* both(id, future)) expectError(response, 401, "AUTH_FUTURE_TIMESTAMP")

      const skewed = yield* sign(owner, id, { timestamp: Date.now() + 10_000 })
      expect((yield* patch(id, skewed, { description: "signed with a fast clock" })).status).toBe(200)
    }))

  it.effect("the owner's signature for another agent id is refused with 403 AUTH_WRONG_AGENT", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const other = yield* sign(owner, randomUUID())
      for (const response of yield* both(id, other)) {
        expectError(response, 403, "AUTH_WRONG_AGENT")
        expect(response.body.error?.details?.agentId).toBe(id)
      }
    }))

  it.effect("another wallet correctly signing for itself is refused with 403 AUTH_WALLET_MISMATCH", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const headers = yield* sign(intruder, id)
      expect(headers["X-Agent-Wallet"]).toBe(intruder.address)
      for (const response of yield* both(id, headers)) expectError(response, 403, "AUTH_WALLET_MISMATCH")
    }))

  it.effect("a signature by one key while X-Agent-Wallet claims the owner is refused with 401 AUTH_INVALID_SIGNATURE", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const forged = yield* sign(intruder, id, { claimedWallet: owner.address })
      for (const response of yield* both(id, forged)) expectError(response, 401, "AUTH_INVALID_SIGNATURE")

      // The owner's genuine signature over a different timestamp than the one sent does not verify either.
      const genuine = yield* sign(owner, id)
      const [message, hex] = genuine["X-Agent-Signature"].split(":sig:") as [string, string]
      const timestamp = Number(message.split(":")[2])
      const replayed = { ...genuine, "X-Agent-Signature": `service-auth:${id}:${timestamp + 1}:sig:${hex}` }
      for (const response of yield* both(id, replayed)) expectError(response, 401, "AUTH_INVALID_SIGNATURE")
    }))

  it.effect("every failure mode has its own code, and after all of them the agent is unchanged", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const before = (yield* read(id)).body.data
      const now = Date.now()
      const attempts: Record<string, Record<string, string>> = {
        AUTH_REQUIRED: {},
        AUTH_MALFORMED: { "X-Agent-Wallet": owner.address, "X-Agent-Signature": `service-auth:${id}:${now}` },
        AUTH_EXPIRED: yield* sign(owner, id, { timestamp: now - 6 * MINUTE }),
        AUTH_FUTURE_TIMESTAMP: yield* sign(owner, id, { timestamp: now + 2 * MINUTE }),
        AUTH_WRONG_AGENT: yield* sign(owner, randomUUID()),
        AUTH_WALLET_MISMATCH: yield* sign(intruder, id),
        AUTH_INVALID_SIGNATURE: yield* sign(intruder, id, { claimedWallet: owner.address })
      }
      const seen = new Map<string, number>()
      for (const [expected, headers] of Object.entries(attempts)) {
        const [patched, removed] = yield* both(id, headers)
        expect(patched!.body.error?.code).toBe(expected)
        expect(removed!.body.error?.code).toBe(expected)
        expect(removed!.status).toBe(patched!.status)
        seen.set(expected, patched!.status)
      }
      expect(new Set(seen.keys()).size).toBe(7)
      expect(Object.fromEntries(seen)).toEqual({
        AUTH_REQUIRED: 401,
        AUTH_MALFORMED: 401,
        AUTH_EXPIRED: 401,
        AUTH_FUTURE_TIMESTAMP: 401,
        AUTH_WRONG_AGENT: 403,
        AUTH_WALLET_MISMATCH: 403,
        AUTH_INVALID_SIGNATURE: 401
      })

      const after = yield* read(id)
      expect(after.status).toBe(200)
      expect(after.body.data).toMatchObject({ name: "Summarizer", status: "active", description: before.description })
      expect(after.body.data.updated_at).toBe(before.updated_at)
    }))

  it.effect("a valid owner signature updates the agent, with a checksummed or lower-case wallet header", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const updated = yield* patch(id, yield* sign(owner, id), { name: "Owner Renamed" })
      expect(updated.status).toBe(200)
      expect(updated.body.data).toMatchObject({ id, name: "Owner Renamed", wallet: owner.address.toLowerCase() })
      const lower = yield* sign(owner, id, { claimedWallet: owner.address.toLowerCase() })
      expect((yield* patch(id, lower, { name: "Summarizer" })).status).toBe(200)
      expect((yield* read(id)).body.data.name).toBe("Summarizer")
    }))

  it.effect("a signature is good for one change: replaying it is refused with 401 AUTH_SIGNATURE_REUSED, also when sent twice at once", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const headers = yield* sign(owner, id)
      // A request refused before the change (invalid body) does not use the signature up.
      expectError(yield* patch(id, headers, { name: "" }), 400, "VALIDATION_ERROR")
      expect((yield* patch(id, headers, { description: "first use" })).status).toBe(200)
      expectError(yield* patch(id, headers, { description: "replayed" }), 401, "AUTH_SIGNATURE_REUSED")
      expectError(yield* remove(id, headers), 401, "AUTH_SIGNATURE_REUSED")
      expect((yield* read(id)).body.data).toMatchObject({ status: "active", description: "first use" })

      // Two requests racing with one fresh signature: exactly one is applied.
      const racing = yield* sign(owner, id)
      const results = yield* Effect.all([patch(id, racing, { description: "racer A" }), patch(id, racing, { description: "racer B" })], {
        concurrency: 2
      })
      expect(results.map((r) => r.status).sort()).toEqual([200, 401])
      const winner = results.find((r) => r.status === 200)!.body.data.description
      expectError(results.find((r) => r.status === 401)!, 401, "AUTH_SIGNATURE_REUSED")
      expect((yield* read(id)).body.data.description).toBe(winner)
    }))

  it.effect("operator endpoints without the bearer token, or with a wrong one, are refused with 401 OPERATOR_AUTH_REQUIRED", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const refusals: ReadonlyArray<Record<string, string>> = [
        {},
        { Authorization: "Bearer wrong-token" },
        { Authorization: `Bearer ${OPERATOR_TOKEN}x` },
        { Authorization: `Bearer ${OPERATOR_TOKEN.slice(0, -1)}` },
        { Authorization: `Basic ${Buffer.from(`operator:${OPERATOR_TOKEN}`).toString("base64")}` },
        { Authorization: OPERATOR_TOKEN },
        { Authorization: "Bearer " }
      ]
      for (const headers of refusals) {
        expectError(yield* operator(`/agents/${id}/status`, { status: "suspended", reason: "no" }, headers), 401, "OPERATOR_AUTH_REQUIRED")
        expectError(yield* operator(`/agents/${id}/trust-tier`, { tier: "premium", reason: "no" }, headers), 401, "OPERATOR_AUTH_REQUIRED")
      }
      expect((yield* read(id)).body.data).toMatchObject({ status: "active", trustTier: "new" })
    }))

  it.effect("an operator suspension freezes the agent for its owner (403 AGENT_SUSPENDED) until it is reinstated", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const suspended = yield* operator(`/agents/${id}/status`, { status: "suspended", reason: "terms violation" })
      expect(suspended.status).toBe(200)
      expect(suspended.body.data).toMatchObject({ id, status: "suspended" })
      expect((yield* read(id)).body.data.status).toBe("suspended")

      const [patched, removed] = yield* both(id, yield* sign(owner, id))
      expectError(patched!, 403, "AGENT_SUSPENDED")
      expectError(removed!, 403, "AGENT_SUSPENDED")
      // The owner cannot lift the suspension by asking for 'active' either.
      expectError(yield* patch(id, yield* sign(owner, id), { status: "active" }), 403, "AGENT_SUSPENDED")
      // A forged signature still fails as a forgery, not as a suspension.
      expectError(yield* patch(id, yield* sign(intruder, id)), 403, "AUTH_WALLET_MISMATCH")
      expect((yield* read(id)).body.data).toMatchObject({ status: "suspended", name: "Summarizer" })

      const reinstated = yield* operator(`/agents/${id}/status`, { status: "active", reason: "appeal granted" })
      expect(reinstated.status).toBe(200)
      expect(reinstated.body.data.status).toBe("active")
      const again = yield* patch(id, yield* sign(owner, id), { name: "Back Again" })
      expect(again.status).toBe(200)
      expect(again.body.data).toMatchObject({ name: "Back Again", status: "active" })
      expect((yield* read(id)).body.data.name).toBe("Back Again")
    }))

  it.effect("an operator-pinned premium tier settles instantly, and pinning null returns the agent to its earned tier", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      expect((yield* read(id)).body.data).toMatchObject({ trustTier: "new", settlementType: "delayed", settlementDelay: "24h" })

      const pinned = yield* operator(`/agents/${id}/trust-tier`, { tier: "premium", reason: "vetted partner" })
      expect(pinned.status).toBe(200)
      expect(pinned.body.data).toMatchObject({ trustTier: "premium", settlementType: "instant", settlementDelay: null })
      expect((yield* read(id)).body.data).toMatchObject({ trustTier: "premium", settlementType: "instant", settlementDelay: null })

      const unpinned = yield* operator(`/agents/${id}/trust-tier`, { tier: null, reason: "partnership ended" })
      expect(unpinned.status).toBe(200)
      expect((yield* read(id)).body.data).toMatchObject({ trustTier: "new", settlementType: "delayed", settlementDelay: "24h" })

      expectError(yield* operator(`/agents/${id}/trust-tier`, { tier: "gold", reason: "x" }), 400, "VALIDATION_ERROR")
      expectError(yield* operator(`/agents/${randomUUID()}/trust-tier`, { tier: "premium", reason: "x" }), 404, "AGENT_NOT_FOUND")
      expectError(yield* operator(`/agents/${randomUUID()}/status`, { status: "suspended", reason: "no such agent" }), 404, "AGENT_NOT_FOUND")
    }))

  it.effect("a valid owner signature deactivates the agent, keeping its data", () =>
    Effect.gen(function* () {
      const id = yield* agentId
      const removed = yield* remove(id, yield* sign(owner, id))
      expect(removed.status).toBe(200)
      expect(removed.body.data).toEqual({ id, status: "inactive" })
      expect((yield* read(id)).body.data).toMatchObject({ status: "inactive", name: "Back Again" })
    }))
})
