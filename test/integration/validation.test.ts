import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { Hex } from "viem"
import { authorizationUsed, call, devAccount, paidCall, signPayment, usdcBalance, walletAuth } from "../support/clients.js"
import { capability, registration, withWalletProof } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"

const REGISTRATION_FEE = 100_000n

/** Never registered in this file: every body built for it reaches the 402 challenge once validation passes. */
const applicant = devAccount(7)
/** Signs real, fundable X-PAYMENT headers that must never be charged for an invalid body. */
const payer = devAccount(8)

type Issue = { readonly path: string; readonly message: string }

const body = (overrides: Record<string, unknown> = {}) => registration(applicant, overrides)
const withPricing = (pricing: Record<string, unknown>) =>
  body({ capabilities: [capability({ pricing: { model: "per-request", basePrice: "0.01", currency: "USDC", ...pricing } })] })
const manyCapabilities = (n: number) => Array.from({ length: n }, (_, i) => capability({ id: `cap-${i}` }))

const register = (baseUrl: string, json: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(() => call(`${baseUrl}/api/v1/agents`, { method: "POST", json, headers }))

const issuesOf = (response: { readonly body: { readonly error?: { readonly details?: any } } }): Array<Issue> =>
  response.body.error?.details?.issues ?? []

/** A 400 VALIDATION_ERROR envelope naming `path` among its issues. */
const expectRefusedAt = (response: Awaited<ReturnType<typeof call>>, path: string) => {
  expect(response.status).toBe(400)
  expect(response.body.success).toBe(false)
  expect(response.body.error?.code).toBe("VALIDATION_ERROR")
  const issues = issuesOf(response)
  expect(issues.length).toBeGreaterThan(0)
  for (const issue of issues) {
    expect(typeof issue.path).toBe("string")
    expect(typeof issue.message).toBe("string")
  }
  expect(issues.map((i) => i.path)).toContain(path)
}

/** Validation passed: the request got as far as the x402 challenge. */
const expectChallenge = (response: Awaited<ReturnType<typeof call>>) => {
  expect(response.status).toBe(402)
  expect(response.body.error?.code).toBe("PAYMENT_REQUIRED")
  expect(response.body.error?.details?.reason).toBe("payment_required")
  expect(response.body.error?.details?.price).toBe("0.100000")
}

const refusedBodies: ReadonlyArray<readonly [string, unknown, string]> = [
  ["a 2-character name", body({ name: "ab" }), "name"],
  ["a 101-character name", body({ name: "n".repeat(101) }), "name"],
  ["a 1001-character description", body({ description: "d".repeat(1001) }), "description"],
  ["11 tags", body({ tags: Array.from({ length: 11 }, (_, i) => `tag${i}`) }), "tags"],
  ["no capabilities", body({ capabilities: [] }), "capabilities"],
  ["51 capabilities", body({ capabilities: manyCapabilities(51) }), "capabilities"],
  ["two capabilities with the same id", body({ capabilities: [capability(), capability({ name: "Again" })] }), "capabilities"],
  [
    "21 examples on a capability",
    body({ capabilities: [capability({ examples: Array.from({ length: 21 }, (_, i) => ({ input: { text: `t${i}` } })) })] }),
    "capabilities.0.examples"
  ],
  ["basePrice 0.00009 (below the 0.0001 minimum)", withPricing({ basePrice: "0.00009" }), "capabilities.0.pricing.basePrice"],
  ["basePrice 10000.000001 (above the 10000 maximum)", withPricing({ basePrice: "10000.000001" }), "capabilities.0.pricing.basePrice"],
  ["basePrice with 7 decimals", withPricing({ basePrice: "0.0000001" }), "capabilities.0.pricing.basePrice"],
  ["basePrice \"abc\"", withPricing({ basePrice: "abc" }), "capabilities.0.pricing.basePrice"],
  ["a negative basePrice", withPricing({ basePrice: "-1" }), "capabilities.0.pricing.basePrice"],
  ["a numeric basePrice", withPricing({ basePrice: 1 }), "capabilities.0.pricing.basePrice"],
  ["currency EUR", withPricing({ currency: "EUR" }), "capabilities.0.pricing.currency"],
  ["pricing model \"free\"", withPricing({ model: "free" }), "capabilities.0.pricing.model"],
  ["an execution endpoint that is not a URL", body({ endpoints: { execution: "not a url" } }), "endpoints.execution"],
  ["an ftp execution endpoint", body({ endpoints: { execution: "ftp://x" } }), "endpoints.execution"],
  ["no execution endpoint", body({ endpoints: { health: "http://127.0.0.1:9/health" } }), "endpoints.execution"],
  ["no endpoints at all", body({ endpoints: undefined }), "endpoints"],
  ["wallet 0x123", body({ wallet: "0x123" }), "wallet"],
  ["a missing name", body({ name: undefined }), "name"]
]

layer(TestApp(), { excludeTestServices: true })("registration validation", (it) => {
  for (const [what, json, path] of refusedBodies) {
    it.effect(`${what} is refused with 400 VALIDATION_ERROR at \`${path}\``, () =>
      Effect.gen(function* () {
        const { baseUrl } = yield* TestEnv
        expectRefusedAt(yield* register(baseUrl, json), path)
      }))
  }

  it.effect("every failing field is reported at once, each with its own path", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* register(
        baseUrl,
        body({ name: "ab", wallet: "0x123", capabilities: [capability({ pricing: { model: "free", basePrice: "abc", currency: "EUR" } })] })
      )
      expect(response.status).toBe(400)
      expect(issuesOf(response).map((i) => i.path)).toEqual(
        expect.arrayContaining([
          "wallet",
          "name",
          "capabilities.0.pricing.model",
          "capabilities.0.pricing.basePrice",
          "capabilities.0.pricing.currency"
        ])
      )
    }))

  it.effect("names of exactly 3 and 100 characters pass validation and reach the payment challenge", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      expectChallenge(yield* register(baseUrl, body({ name: "abc" })))
      expectChallenge(yield* register(baseUrl, body({ name: "n".repeat(100) })))
    }))

  it.effect("the other limits accept their boundary values: 1000-char description, 10 tags, 50 capabilities, 20 examples", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      expectChallenge(yield* register(baseUrl, body({ description: "d".repeat(1000) })))
      expectChallenge(yield* register(baseUrl, body({ tags: Array.from({ length: 10 }, (_, i) => `tag${i}`) })))
      expectChallenge(yield* register(baseUrl, body({ capabilities: manyCapabilities(50) })))
      expectChallenge(
        yield* register(
          baseUrl,
          body({ capabilities: [capability({ examples: Array.from({ length: 20 }, (_, i) => ({ input: { text: `t${i}` } })) })] })
        )
      )
    }))

  it.effect("basePrice 10000 and 0.0001 (the bounds) pass validation and reach the payment challenge", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      expectChallenge(yield* register(baseUrl, withPricing({ basePrice: "10000" })))
      expectChallenge(yield* register(baseUrl, withPricing({ basePrice: "0.0001" })))
      expectChallenge(yield* register(baseUrl, withPricing({ basePrice: "0.000100", currency: "DAI", model: "dynamic", maxPrice: "0.01" })))
    }))

  it.effect("an inputSchema that is not a valid JSON Schema is refused with an issue inside capabilities.0.inputSchema", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      for (const inputSchema of [{ type: "strin" }, { minLength: "5" }]) {
        const response = yield* register(baseUrl, body({ capabilities: [capability({ inputSchema })] }))
        expect(response.status).toBe(400)
        expect(response.body.error?.code).toBe("VALIDATION_ERROR")
        const paths = issuesOf(response).map((i) => i.path)
        expect(paths.length).toBeGreaterThan(0)
        for (const path of paths) expect(path.startsWith("capabilities.0.inputSchema")).toBe(true)
        expect(issuesOf(response).some((i) => /JSON Schema/.test(i.message))).toBe(true)
      }
    }))

  it.effect("issue paths inside a broken inputSchema are dot-separated like every other path (capabilities.0.inputSchema.type)", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const cases: ReadonlyArray<readonly [object, string]> = [
        [{ type: "strin" }, "capabilities.0.inputSchema.type"],
        [{ minLength: "5" }, "capabilities.0.inputSchema.minLength"],
        [{ type: "object", properties: { text: { type: "strin" } } }, "capabilities.0.inputSchema.properties.text.type"]
      ]
      for (const [inputSchema, path] of cases) {
        const response = yield* register(baseUrl, body({ capabilities: [capability({ inputSchema })] }))
        expectRefusedAt(response, path)
      }
    }))

  it.effect("a broken outputSchema on the second capability is reported at capabilities.1.outputSchema", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* register(
        baseUrl,
        body({ capabilities: [capability(), capability({ id: "second", outputSchema: { type: 42 } })] })
      )
      expect(response.status).toBe(400)
      const paths = issuesOf(response).map((i) => i.path)
      expect(paths.length).toBeGreaterThan(0)
      for (const path of paths) expect(path.startsWith("capabilities.1.outputSchema")).toBe(true)
    }))

  it.effect("invalid bodies carrying a valid X-PAYMENT are refused without touching the payment, which stays spendable", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const invalid: ReadonlyArray<readonly [unknown, string]> = [
        [body({ name: "ab" }), "name"],
        [withPricing({ basePrice: "0.00009" }), "capabilities.0.pricing.basePrice"],
        [body({ capabilities: [] }), "capabilities"],
        [body({ wallet: "0x123" }), "wallet"],
        [body({ endpoints: { execution: "ftp://x" } }), "endpoints.execution"],
        [body({ capabilities: [capability({ inputSchema: { type: "strin" } })] }), "capabilities.0.inputSchema"]
      ]
      const nonces: Array<Hex> = []
      let lastHeader = ""
      for (const [json, path] of invalid) {
        const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: REGISTRATION_FEE }))
        nonces.push(nonce)
        lastHeader = header
        const response = yield* register(baseUrl, json, { "X-PAYMENT": header })
        expect(response.status).toBe(400)
        expect(response.body.error?.code).toBe("VALIDATION_ERROR")
        expect(issuesOf(response).some((i) => i.path.startsWith(path))).toBe(true)
        expect(response.headers.get("x-payment-response")).toBeNull()
      }
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      for (const nonce of nonces) {
        expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
      }

      // The very same header was good money: on a valid body it is settled and charged exactly once.
      const owner = devAccount(6)
      // The payer is not the owner: the owner's walletProof lets it pay (issue 25).
      const signed = yield* Effect.promise(() => withWalletProof(owner, registration(owner)))
      const paid = yield* register(baseUrl, signed, { "X-PAYMENT": lastHeader })
      expect(paid.status).toBe(201)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before - REGISTRATION_FEE)
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonces[nonces.length - 1]!))).toBe(true)
    }))

  it.effect("a PATCH with an invalid body is refused with 400 even when the owner's signature is valid, and changes nothing", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(9)
      const created = yield* Effect.promise(() => paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner) }))
      expect(created.status).toBe(201)
      const id: string = created.body.data.id
      const patch = (json: unknown) =>
        Effect.promise(async () => call(`${baseUrl}/api/v1/agents/${id}`, { method: "PATCH", headers: await walletAuth(owner, id), json }))

      expectRefusedAt(yield* patch({ name: "ab" }), "name")
      expectRefusedAt(yield* patch({ tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }), "tags")
      expectRefusedAt(yield* patch({ capabilities: [capability({ pricing: { model: "per-request", basePrice: "0.00001", currency: "USDC" } })] }), "capabilities.0.pricing.basePrice")
      expectRefusedAt(yield* patch({ endpoints: { execution: "ftp://x" } }), "endpoints.execution")
      expectRefusedAt(yield* patch({ chainSettings: { chain_max_depth: 6 } }), "chainSettings.chain_max_depth")
      expectRefusedAt(yield* patch({ status: "suspended" }), "status")
      const schemaIssue = yield* patch({ capabilities: [capability({ inputSchema: { minLength: "5" } })] })
      expect(schemaIssue.status).toBe(400)
      expect(issuesOf(schemaIssue).every((i) => i.path.startsWith("capabilities.0.inputSchema"))).toBe(true)

      const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`))
      expect(read.body.data).toMatchObject({ name: "Summarizer", tags: ["nlp", "text"], status: "active" })
      expect(read.body.data.capabilities[0].pricing.basePrice).toBe("0.010000")

      // Control: the same signature scheme with a valid body goes through.
      const ok = yield* patch({ name: "abc" })
      expect(ok.status).toBe(200)
      expect(ok.body.data.name).toBe("abc")
    }))
})

layer(TestApp({ ALLOW_PRIVATE_URLS: "false" }), { excludeTestServices: true })("registration URL policy (ALLOW_PRIVATE_URLS=false)", (it) => {
  const privateUrls: ReadonlyArray<readonly [string, string]> = [
    ["http://127.0.0.1:9/x", "127.0.0.1"],
    ["http://10.1.2.3/x", "10.1.2.3"],
    ["http://[::1]/x", "::1"],
    ["http://169.254.169.254/latest/meta-data", "169.254.169.254"],
    ["http://[::ffff:127.0.0.1]/x", "::ffff:7f00:1"],
    ["http://2130706433/x", "127.0.0.1"]
  ]
  // Literal addresses: nothing is looked up, so they are refused before the payment (naming what the client wrote).
  for (const [url, address] of privateUrls) {
    it.effect(`an execution endpoint at ${url} is refused with an issue at endpoints.execution naming the private address`, () =>
      Effect.gen(function* () {
        const { baseUrl } = yield* TestEnv
        const response = yield* register(baseUrl, body({ endpoints: { execution: url } }))
        expectRefusedAt(response, "endpoints.execution")
        const issue = issuesOf(response).find((i) => i.path === "endpoints.execution")!
        expect(issue.message).toMatch(/private or reserved address/)
        expect(issue.message).toContain(address)
      }))
  }

  it.effect("a host name (localhost) is looked up only once the registration is paid: unpaid, it gets the challenge", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      expectChallenge(yield* register(baseUrl, body({ endpoints: { execution: "http://localhost/x" } })))
    }))

  it.effect("a private health URL is refused at endpoints.health", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* register(baseUrl, body({ endpoints: { execution: "http://93.184.216.34/x", health: "http://192.168.1.1/health" } }))
      expectRefusedAt(response, "endpoints.health")
      expect(issuesOf(response).map((i) => i.path)).not.toContain("endpoints.execution")
    }))

  it.effect("a public-IP execution endpoint passes validation and reaches the payment challenge", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      expectChallenge(yield* register(baseUrl, body({ endpoints: { execution: "http://93.184.216.34/x" } })))
    }))

  it.effect("a private endpoint with a valid X-PAYMENT is refused and the payment is not used", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: REGISTRATION_FEE }))
      const response = yield* register(baseUrl, body({ endpoints: { execution: "http://10.1.2.3/x" } }), { "X-PAYMENT": header })
      expectRefusedAt(response, "endpoints.execution")
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
    }))
})
