// Validation before payment under a hard time bound, as the attack itself: a capability whose inputSchema is an `enum` of
// 400 small objects (a schema well within the registration limits, estimated at a few hundred units of work) and an
// unpaid 60,000-key input object (~880 KB). ajv compares the input whole against every enum entry: about 20 s of a
// blocked event loop on this machine before the deadline existed, then a 402. Now the validation is terminated at
// VALIDATION_DEADLINE_MS and answered 400 VALIDATION_ERROR; a signed payment sent with it is not charged, and the next
// ordinary request validates as before.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { authorizationUsed, call, devAccount, signPayment, usdcBalance } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, registerAgent } from "../support/scenario.js"

const enumOfObjects = { enum: Array.from({ length: 400 }, (_, i) => ({ [`e${i}`]: i })) }
const wideInput = () => Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, i]))

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { excludeTestServices: true })("validation deadline", (it) => {
  it.scoped("an unpaid input whose validation the estimate misjudges is cut off at the deadline: 400 VALIDATION_ERROR, nothing charged, the next request validated as usual", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(3), agent.url, {
        capabilities: [echoCapability({ inputSchema: enumOfObjects }), echoCapability({ id: "plain" })]
      })
      const payer = devAccount(9)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: 10_000n }))

      const body = { targetAgentId: agentId, capabilityId: "echo", input: wideInput() }
      expect(JSON.stringify(body).length).toBeLessThan(1024 * 1024)
      const refused = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute`, { method: "POST", json: body, headers: { "X-PAYMENT": header } }))
      expect(refused.status).toBe(400)
      expect(refused.body).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR" } })
      expect(refused.body.error?.details?.issues).toEqual([
        { path: "input", message: "could not be checked against this schema within 500 ms (its rules are too costly for this input: send a smaller one)" }
      ])
      expect(refused.headers.get("x-payment-response")).toBeNull()
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)

      // The service validates on: a small input against the same schema, and an ordinary one, reach the 402 challenge.
      const small = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { e7: 7 } } }))
      expect(small.status).toBe(402)
      const plain = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "plain", input: { text: "hi" } } }))
      expect(plain.status).toBe(402)
    }))
})
