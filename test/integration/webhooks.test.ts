// Webhook subscriptions: managed with the owner's wallet signature (single-use for changes), HTTPS (or loopback http when private URLs
// are allowed), known events only, at most 5 per agent; the secret is shown once and stored encrypted.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"

const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, {
        method: init.method ?? (init.json === undefined ? "GET" : "POST"),
        ...(init.json === undefined ? {} : { json: init.json }),
        headers: init.headers ?? {}
      })))

const signed = (owner: PrivateKeyAccount, agentId: string) => Effect.promise(() => walletAuth(owner, agentId))

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { excludeTestServices: true })("webhook subscriptions", (it) => {
  it.scoped("the owner creates, lists, changes, rotates and deletes a webhook; the secret is shown once and stored encrypted", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const owner = devAccount(1)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url)
      const created = yield* api("/api/v1/webhooks", {
        json: { agentId, url: "https://hooks.example.com/marketplace", events: ["execution.completed", "chain.*"] },
        headers: yield* signed(owner, agentId)
      })
      expect(created.status).toBe(201)
      const { id, secret } = created.body.data
      expect(id).toMatch(/^wh_/)
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
      const [stored] = yield* sql<{ secretEncrypted: string }>`SELECT secret_encrypted FROM webhook_subscriptions WHERE id = ${id}`
      expect(stored?.secretEncrypted).toMatch(/^v1:/)
      expect(stored?.secretEncrypted).not.toContain(secret.slice(6))

      const listed = yield* api(`/api/v1/webhooks/agent/${agentId}`, { headers: yield* signed(owner, agentId) })
      expect(listed.body.data.webhooks).toEqual([
        expect.objectContaining({ id, url: "https://hooks.example.com/marketplace", events: ["execution.completed", "chain.*"], isActive: true, failure_count: 0 })
      ])
      expect(JSON.stringify(listed.body)).not.toContain(secret.slice(6))

      const patched = yield* api(`/api/v1/webhooks/${id}`, { method: "PATCH", json: { events: ["*"], isActive: false }, headers: yield* signed(owner, agentId) })
      expect(patched.body.data).toEqual({ id, updated: true })
      const rotated = yield* api(`/api/v1/webhooks/${id}/rotate-secret`, { method: "POST", headers: yield* signed(owner, agentId) })
      expect(rotated.body.data.secret).toMatch(/^whsec_/)
      expect(rotated.body.data.secret).not.toBe(secret)
      const after = (yield* api(`/api/v1/webhooks/agent/${agentId}`, { headers: yield* signed(owner, agentId) })).body.data.webhooks[0]
      expect(after).toMatchObject({ events: ["*"], isActive: false })

      const deleted = yield* api(`/api/v1/webhooks/${id}`, { method: "DELETE", headers: yield* signed(owner, agentId) })
      expect(deleted.body.data).toEqual({ deleted: true })
      expect((yield* api(`/api/v1/webhooks/agent/${agentId}`, { headers: yield* signed(owner, agentId) })).body.data.webhooks).toEqual([])
      expect((yield* api(`/api/v1/webhooks/${id}`, { method: "DELETE", headers: yield* signed(owner, agentId) })).status).toBe(404)
    }))

  it.scoped("refused: a bare wallet header, another wallet, a replayed signature, a non-https URL, unknown events, a sixth webhook", () =>
    Effect.gen(function* () {
      const owner = devAccount(2)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url)
      const create = (json: Record<string, unknown>, headers: Record<string, string>) => api("/api/v1/webhooks", { json: { agentId, ...json }, headers })
      const good = { url: "https://hooks.example.com/a" }

      const bare = yield* create(good, { "X-Agent-Wallet": owner.address })
      expect({ status: bare.status, code: bare.body.error?.code }).toEqual({ status: 401, code: "AUTH_REQUIRED" })
      const stranger = yield* create(good, yield* Effect.promise(() => walletAuth(devAccount(3), agentId)))
      expect(stranger.status).toBe(403)
      const auth = yield* signed(owner, agentId)
      expect((yield* create(good, auth)).status).toBe(201)
      expect((yield* create(good, auth)).body.error?.code).toBe("AUTH_SIGNATURE_REUSED")

      const refusedUrls = ["http://hooks.example.com/a", "ftp://hooks.example.com", "not a url", "https://user:pw@hooks.example.com/"]
      for (const url of refusedUrls) {
        const refused = yield* create({ url }, yield* signed(owner, agentId))
        expect({ url, status: refused.status, path: refused.body.error?.details?.issues?.[0]?.path }).toEqual({ url, status: 400, path: "url" })
      }
      // Loopback http is allowed here only because the test server runs with ALLOW_PRIVATE_URLS (as devnet does).
      expect((yield* create({ url: "http://127.0.0.1:9/hook" }, yield* signed(owner, agentId))).status).toBe(201)
      const unknown = yield* create({ ...good, events: ["execution.completed", "execution.exploded"] }, yield* signed(owner, agentId))
      expect(unknown.body.error?.details?.issues).toEqual([{ path: "events", message: "unknown events: execution.exploded" }])

      for (let i = 0; i < 3; i++) expect((yield* create(good, yield* signed(owner, agentId))).status).toBe(201)
      const sixth = yield* create(good, yield* signed(owner, agentId))
      expect({ status: sixth.status, code: sixth.body.error?.code }).toEqual({ status: 409, code: "WEBHOOK_LIMIT_REACHED" })
    }))
})
