// Every place that accepts OPERATOR_TOKEN goes through one throttle of wrong tokens per client address (TRUST_PROXY: the
// proxy's X-Forwarded-For names the client, so one test plays several): five failures within 15 minutes, API and console
// together, then 429 OPERATOR_AUTH_THROTTLED with Retry-After for every further wrong token; each failure counted in a
// metric and logged. The right token is always accepted: whoever shares the operator's address cannot lock it out.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { capturingStdout } from "../support/logs.js"

/** GET an operator endpoint from `address` with `token`: status, Retry-After and the envelope. */
const operatorGet = (address: string, token: string, path = "/api/v1/operator/machines") =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const response = await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${token}`, "x-forwarded-for": address } })
      return { status: response.status, retryAfter: response.headers.get("retry-after"), body: (await response.json()) as { success: boolean; error?: { code: string; message: string } } }
    }))

const consoleLogin = (address: string, token: string) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () =>
      (await fetch(`${baseUrl}/ops/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": address },
        body: new URLSearchParams({ token }).toString()
      })).status))

const failures = (surface: string, outcome: string) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const text = await (await fetch(`${baseUrl}/metrics`)).text()
      // Per-process series carry the instance's label too (docs/observability.md).
      const line = text.split("\n").find((l) => l.startsWith(`marketplace_operator_token_failures_total{surface="${surface}",outcome="${outcome}",`))
      return line === undefined ? 0 : Number(line.split(" ").at(-1))
    }))



layer(TestApp({ BACKGROUND_WORKERS: "false", TRUST_PROXY: "true", LOG_FORMAT: "json" }), { excludeTestServices: true })("operator token attempts", (it) => {
  it.scoped("after five wrong bearer tokens further wrong ones from that address get 429 with Retry-After, the right one still passes; counted, logged", () =>
    Effect.gen(function* () {
      const [attacker, operator] = ["203.0.113.70", "198.51.100.70"]
      const refusedBefore = yield* failures("api", "refused")
      const { lines } = yield* capturingStdout(Effect.gen(function* () {
        for (let i = 0; i < 5; i++) {
          const wrong = yield* operatorGet(attacker, `guess-${i}-0123456789abcdef`)
          expect(wrong.status).toBe(401)
          expect(wrong.body.error?.code).toBe("OPERATOR_AUTH_REQUIRED")
        }
        const locked = yield* operatorGet(attacker, "guess-5-0123456789abcdef")
        expect(locked.status).toBe(429)
        expect(locked.body).toMatchObject({ success: false, error: { code: "OPERATOR_AUTH_THROTTLED" } })
        expect(Number(locked.retryAfter)).toBeGreaterThan(14 * 60)
        expect(Number(locked.retryAfter)).toBeLessThanOrEqual(15 * 60)
        // The right token is checked first: the address's failures do not refuse it.
        expect((yield* operatorGet(attacker, OPERATOR_TOKEN)).status).toBe(200)
        expect((yield* operatorGet(attacker, OPERATOR_TOKEN, "/api/v1/operator/stats")).status).toBe(200)
        expect((yield* operatorGet(attacker, "guess-6-0123456789abcdef")).status).toBe(429)
      }))
      expect((yield* failures("api", "refused")) - refusedBefore).toBe(5)
      expect(yield* failures("api", "locked")).toBeGreaterThanOrEqual(2)
      const logged = lines.filter((l) => l.includes("operator token")).map((l) => JSON.parse(l) as Record<string, unknown>)
      expect(logged.filter((l) => String(l["msg"]).includes("operator token refused"))).toHaveLength(5)
      expect(logged.some((l) => String(l["msg"]).includes("too many failures") && JSON.stringify(l).includes(attacker))).toBe(true)
      expect(lines.join("\n")).not.toContain(OPERATOR_TOKEN)

      // Another address is not affected.
      expect((yield* operatorGet(operator, OPERATOR_TOKEN)).status).toBe(200)
    }))

  it.scoped("the API and the /ops login count together: three wrong tokens on one and two on the other throttle both", () =>
    Effect.gen(function* () {
      const address = "203.0.113.71"
      for (let i = 0; i < 3; i++) expect((yield* operatorGet(address, `api-guess-${i}`)).status).toBe(401)
      for (let i = 0; i < 2; i++) expect(yield* consoleLogin(address, `console-guess-${i}`)).toBe(401)
      expect(yield* consoleLogin(address, "console-guess-2")).toBe(429)
      expect((yield* operatorGet(address, "api-guess-3")).status).toBe(429)
      expect(yield* failures("console", "refused")).toBeGreaterThanOrEqual(2)
    }))

  it.scoped("the right token is not counted, and a request without a token is refused without counting", () =>
    Effect.gen(function* () {
      const address = "203.0.113.72"
      for (let i = 0; i < 10; i++) expect((yield* operatorGet(address, OPERATOR_TOKEN)).status).toBe(200)
      const { baseUrl } = yield* TestEnv
      for (let i = 0; i < 10; i++) {
        const bare = yield* Effect.promise(() => fetch(`${baseUrl}/api/v1/operator/machines`, { headers: { "x-forwarded-for": address } }).then((r) => r.status))
        expect(bare).toBe(401)
      }
      expect((yield* operatorGet(address, OPERATOR_TOKEN)).status).toBe(200)
    }))
})

layer(TestApp({ BACKGROUND_WORKERS: "false", TRUST_PROXY: "true" }), { excludeTestServices: true })("the operator's shared address", (it) => {
  it.scoped("after 100 requests without or with wrong tokens from the operator's address, the operator still reads the API, logs in to /ops and sees its pages; the 101st wrong token is throttled", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const shared = "198.51.100.99" // one office NAT: the stranger and the operator
      for (let i = 0; i < 60; i++) {
        const bare = yield* Effect.promise(() => fetch(`${baseUrl}/api/v1/operator/machines`, { headers: { "x-forwarded-for": shared } }).then((r) => r.status))
        expect(bare).toBe(401)
      }
      for (let i = 0; i < 40; i++) {
        const status = i % 2 === 0 ? (yield* operatorGet(shared, `stranger-${i}-0123456789abcdef`)).status : yield* consoleLogin(shared, `stranger-${i}`)
        expect(status).toBe(i < 5 ? 401 : 429)
      }

      const api = yield* operatorGet(shared, OPERATOR_TOKEN)
      expect(api.status).toBe(200)
      expect(api.body.success).toBe(true)
      expect((yield* operatorGet(shared, OPERATOR_TOKEN, "/api/v1/operator/stats")).status).toBe(200)

      const login = yield* Effect.promise(() =>
        fetch(`${baseUrl}/ops/login`, {
          method: "POST",
          redirect: "manual",
          headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": shared },
          body: new URLSearchParams({ token: OPERATOR_TOKEN }).toString()
        }))
      expect(login.status).toBe(303)
      const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] ?? ""
      expect(cookie).toMatch(/^ops_session=/)
      for (const path of ["/ops", "/ops/overview", "/ops/actions"]) {
        const page = yield* Effect.promise(() => fetch(`${baseUrl}${path}`, { redirect: "manual", headers: { cookie, "x-forwarded-for": shared } }))
        expect([path, page.status]).toEqual([path, 200])
        expect(yield* Effect.promise(() => page.text())).not.toContain("Operator login")
      }

      const wrong = yield* operatorGet(shared, "stranger-100-0123456789abcdef")
      expect(wrong.status).toBe(429)
      expect(wrong.body.error?.code).toBe("OPERATOR_AUTH_THROTTLED")
      expect(yield* consoleLogin(shared, "stranger-101")).toBe(429)
    }))
})
