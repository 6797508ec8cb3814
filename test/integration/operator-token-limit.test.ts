// Finding 8: the operator API accepted unlimited wrong bearer tokens (only the /ops login was limited). Now every place
// that accepts OPERATOR_TOKEN goes through one throttle per client address (TRUST_PROXY: the proxy's X-Forwarded-For
// names the client, so one test plays several): five failures within 15 minutes, API and console together, then 429
// OPERATOR_AUTH_THROTTLED with Retry-After whatever the token; each failure counted in a metric and logged.
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
      const line = text.split("\n").find((l) => l.startsWith(`marketplace_operator_token_failures_total{surface="${surface}",outcome="${outcome}"}`))
      return line === undefined ? 0 : Number(line.split(" ").at(-1))
    }))



layer(TestApp({ BACKGROUND_WORKERS: "false", TRUST_PROXY: "true", LOG_FORMAT: "json" }), { excludeTestServices: true })("operator token attempts", (it) => {
  it.scoped("five wrong bearer tokens lock the operator API for that address (429, Retry-After), even for the right token; counted, logged", () =>
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
        // No token is checked while locked: the right one is refused too (a guess that succeeds would not show).
        expect((yield* operatorGet(attacker, OPERATOR_TOKEN)).status).toBe(429)
        expect((yield* operatorGet(attacker, OPERATOR_TOKEN, "/api/v1/operator/stats")).status).toBe(429)
      }))
      expect((yield* failures("api", "refused")) - refusedBefore).toBe(5)
      expect(yield* failures("api", "locked")).toBeGreaterThanOrEqual(3)
      const logged = lines.filter((l) => l.includes("operator token")).map((l) => JSON.parse(l) as Record<string, unknown>)
      expect(logged.filter((l) => String(l["msg"]).includes("operator token refused"))).toHaveLength(5)
      expect(logged.some((l) => String(l["msg"]).includes("too many failures") && JSON.stringify(l).includes(attacker))).toBe(true)
      expect(lines.join("\n")).not.toContain(OPERATOR_TOKEN)

      // Another address is not affected.
      expect((yield* operatorGet(operator, OPERATOR_TOKEN)).status).toBe(200)
    }))

  it.scoped("the API and the /ops login count together: three wrong tokens on one and two on the other lock both", () =>
    Effect.gen(function* () {
      const address = "203.0.113.71"
      for (let i = 0; i < 3; i++) expect((yield* operatorGet(address, `api-guess-${i}`)).status).toBe(401)
      for (let i = 0; i < 2; i++) expect(yield* consoleLogin(address, `console-guess-${i}`)).toBe(401)
      expect(yield* consoleLogin(address, OPERATOR_TOKEN)).toBe(429)
      expect((yield* operatorGet(address, OPERATOR_TOKEN)).status).toBe(429)
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
