// Finding 7: nothing about the service's own network before authentication. A refused URL says that it is not allowed,
// never what its host resolved to; the registration's payment, the owner's signature and the execution's payment are
// checked before any lookup of a host a stranger names (`localhost` plays an internal name: it resolves to 127.0.0.1/::1).
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { authorizationUsed, call, devAccount, paidCall, signPayment, walletAuth } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"

const REGISTRATION_FEE = 100_000n
const INTERNAL = "localhost"
/** What an answer must never say: what the internal name resolves to (the service's own URL is 127.0.0.1 too, so not that alone). */
const RESOLVED = /resolves? to|\(127\.0\.0\.1|\(::1|loopback/

const owner = devAccount(6)
const stranger = devAccount(5)
const payer = devAccount(8)

layer(TestApp({ ALLOW_PRIVATE_URLS: "false", BACKGROUND_WORKERS: "false" }), { excludeTestServices: true })("URL refusals before authentication", (it) => {
  it.effect("an unpaid registration naming an internal host gets the payment challenge, not what the host resolves to", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const answer = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/agents`, { method: "POST", json: registration(devAccount(7), { endpoints: { execution: `http://${INTERNAL}:9/x` } }) }))
      expect(answer.status).toBe(402)
      expect(answer.body.error?.code).toBe("PAYMENT_REQUIRED")
      expect(JSON.stringify(answer.body)).not.toMatch(RESOLVED)
    }))

  it.effect("a paid registration naming it is refused as not allowed, without the address, and nothing is charged", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: REGISTRATION_FEE }))
      const answer = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/agents`, {
          method: "POST",
          json: registration(payer, { endpoints: { execution: `http://${INTERNAL}:9/x` } }),
          headers: { "X-PAYMENT": header }
        }))
      expect(answer.status).toBe(400)
      expect(answer.body.error?.code).toBe("VALIDATION_ERROR")
      const issue = (answer.body.error?.details?.issues as Array<{ path: string; message: string }>).find((i) => i.path === "endpoints.execution")
      expect(issue?.message).toContain(`host ${INTERNAL} is not allowed`)
      expect(JSON.stringify(answer.body)).not.toMatch(RESOLVED)
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
    }))

  it.effect("webhook creation and the paid call check the owner's signature and the payment before looking a host up", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const created = yield* Effect.promise(() =>
        paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner, { endpoints: { execution: "http://93.184.216.34/x" } }) }))
      expect(created.status).toBe(201)
      const agentId = String(created.body.data.id)

      // A stranger's signature: refused as such (401/403), before the URL's host is looked up.
      const hook = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/webhooks`, { method: "POST", json: { agentId, url: `https://${INTERNAL}/hook` }, headers: await walletAuth(stranger, agentId) }))
      expect([401, 403]).toContain(hook.status)
      expect(hook.body.error?.code).toMatch(/^AUTH_/)
      expect(JSON.stringify(hook.body)).not.toMatch(RESOLVED)

      // The owner's own signature: now the host is looked up, and refused without saying what it resolved to.
      const own = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/webhooks`, { method: "POST", json: { agentId, url: `https://${INTERNAL}/hook` }, headers: await walletAuth(owner, agentId) }))
      expect(own.status).toBe(400)
      expect(JSON.stringify(own.body)).toContain(`host ${INTERNAL} is not allowed`)
      expect(JSON.stringify(own.body)).not.toMatch(RESOLVED)

      // An unpaid execution with an internal callback: the payment challenge, not the callback's addresses.
      const unpaid = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, {
          method: "POST",
          json: { targetAgentId: agentId, capabilityId: "summarize", input: { text: "hi" }, callbackUrl: `https://${INTERNAL}/cb` }
        }))
      expect(unpaid.status).toBe(402)
      expect(JSON.stringify(unpaid.body)).not.toMatch(RESOLVED)
    }))
})
