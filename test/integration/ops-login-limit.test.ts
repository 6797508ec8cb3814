// The /ops login's limit on failed logins per client address, through real HTTP (TRUST_PROXY: the address is the
// proxy's X-Forwarded-For, so one test plays several clients): five failures in 15 minutes, then 429 with Retry-After
// and a clear message for every further wrong token (the right one still logs in); other addresses are not affected, a
// success unlocks nobody, the failures
// live in PostgreSQL (shared by every process) and age out of the window (TestClock), and the prune keeps them till then.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { RateLimits } from "../../services/executions/RateLimits.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** POST /ops/login from `address` (as the proxy names it): status, Retry-After, page text and session cookie. */
const login = (address: string, token: string) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const response = await fetch(`${baseUrl}/ops/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": address },
        body: new URLSearchParams({ token }).toString()
      })
      return {
        status: response.status,
        retryAfter: response.headers.get("retry-after"),
        text: await response.text(),
        session: (response.headers.get("set-cookie") ?? "").startsWith("ops_session=")
      }
    }))

const storedFailures = (address: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    Effect.map(sql<{ total: string | null }>`SELECT sum(count)::text AS total FROM rate_limit_windows WHERE key = ${`ops-login:${address}`}`, (rows) =>
      Number(rows[0]?.total ?? "0")))

layer(TestApp({ BACKGROUND_WORKERS: "false", TRUST_PROXY: "true" }))("ops login limit", (it) => {
  it.scoped("five failed logins from one address throttle its wrong tokens for 15 minutes (429, Retry-After), not the right one, and no one else", () =>
    Effect.gen(function* () {
      yield* realNow
      const [attacker, operator, neighbour] = ["203.0.113.7", "198.51.100.20", "198.51.100.21"]
      for (let i = 0; i < 5; i++) expect((yield* login(attacker, `guess-${i}`)).status).toBe(401)
      expect(yield* storedFailures(attacker)).toBe(5)

      const locked = yield* login(attacker, "guess-5")
      expect(locked.status).toBe(429)
      expect(Number(locked.retryAfter)).toBeGreaterThan(14 * 60)
      expect(Number(locked.retryAfter)).toBeLessThanOrEqual(15 * 60)
      expect(locked.text).toContain("Too many failed logins from your address")
      expect(locked.text).toContain(`${locked.retryAfter} seconds`)
      // The right token is checked before the throttle: it logs in, and neither it nor a throttled try extends the lock.
      const right = yield* login(attacker, OPERATOR_TOKEN)
      expect(right).toMatchObject({ status: 303, session: true })
      expect(yield* storedFailures(attacker)).toBe(5)

      // Another address logs in; its success unlocks nobody, and a failure of its own counts only for it.
      expect(yield* login(operator, OPERATOR_TOKEN)).toMatchObject({ status: 303, session: true })
      expect(yield* storedFailures(operator)).toBe(0)
      expect((yield* login(attacker, "guess-6")).status).toBe(429)
      expect((yield* login(neighbour, "typo")).status).toBe(401)
      expect(yield* login(neighbour, OPERATOR_TOKEN)).toMatchObject({ status: 303, session: true })

      // The prune worker keeps failures until they leave the window (its own windows are a minute long).
      const limits = yield* RateLimits
      yield* TestClock.adjust(10 * 60_000)
      yield* limits.prune
      expect(yield* storedFailures(attacker)).toBe(5)
      expect((yield* login(attacker, "guess-7")).status).toBe(429)

      // Fifteen minutes after the failures they have aged out: the address may try again, and they are pruned.
      yield* TestClock.adjust(5 * 60_000 + 1_000)
      yield* limits.prune
      expect(yield* storedFailures(attacker)).toBe(0)
      expect((yield* login(attacker, "guess-8")).status).toBe(401)
      expect(yield* login(attacker, OPERATOR_TOKEN)).toMatchObject({ status: 303, session: true })
    }))

  it.scoped("failures spread over the window age out one by one: Retry-After names when the oldest leaves", () =>
    Effect.gen(function* () {
      yield* realNow
      const address = "192.0.2.44"
      expect((yield* login(address, "a")).status).toBe(401)
      yield* TestClock.adjust(5 * 60_000)
      for (let i = 0; i < 4; i++) expect((yield* login(address, `b${i}`)).status).toBe(401)
      const locked = yield* login(address, "c")
      expect(locked.status).toBe(429)
      // The first failure leaves the window about 10 minutes from now (buckets of a minute).
      expect(Number(locked.retryAfter)).toBeGreaterThan(9 * 60)
      expect(Number(locked.retryAfter)).toBeLessThanOrEqual(10 * 60)
      yield* TestClock.adjust(Number(locked.retryAfter) * 1000)
      // One failure aged out: one more try is allowed (and it fails), then locked again.
      expect((yield* login(address, "d")).status).toBe(401)
      expect((yield* login(address, "e")).status).toBe(429)
    }))

  it.scoped("parallel wrong guesses from one address: five are refused, the rest throttled", () =>
    Effect.gen(function* () {
      yield* realNow
      const address = "192.0.2.99"
      const answers = yield* Effect.all(Array.from({ length: 12 }, (_, i) => login(address, `parallel-${i}`)), { concurrency: "unbounded" })
      const statuses = answers.map((a) => a.status)
      expect(statuses.filter((s) => s === 401)).toHaveLength(5)
      expect(statuses.filter((s) => s === 429)).toHaveLength(7)
      expect(yield* storedFailures(address)).toBe(5)
    }))
})
