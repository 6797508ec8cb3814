// The operator console in a real headless browser (Debian's chromium through playwright-core): a wrong token is refused
// without a cookie; logged in, the operator walks from the overview to a failed execution (an agent answering 500, its
// retry window closed), sees its history, retries its refund through the confirmation form, and sees the action with
// who and why in the history. The session cookie is HttpOnly + SameSite=Strict and the token is in no URL.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { existsSync, mkdirSync } from "node:fs"
import { type Browser, chromium, type Page } from "playwright-core"
import { describe, it as plainIt } from "vitest"
import { MachineHost } from "../../machines/Host.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const CHROMIUM = "/usr/bin/chromium"
const haveChromium = existsSync(CHROMIUM)
const SCREENSHOT = "test-artifacts/ops-console.png"

if (!haveChromium) {
  if (process.env["CI"]) {
    plainIt("the console test needs Debian's chromium at /usr/bin/chromium (.ci/run installs it)", () => {
      throw new Error(`${CHROMIUM} is missing in CI`)
    })
  } else {
    plainIt.skip(`ops console browser test skipped: ${CHROMIUM} is missing (apt-get install chromium)`, () => {})
  }
}

const launch = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: CHROMIUM, args: process.getuid?.() === 0 ? ["--no-sandbox"] : [] })),
  (browser: Browser) => Effect.promise(() => browser.close())
)
const step = <A>(f: () => Promise<A>) => Effect.promise(f)

describe.skipIf(!haveChromium)("ops console", () => {
  layer(TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }))("in a browser", (it) => {
    it.scoped("log in (a wrong token refused first), open a failed execution's history, retry its refund with a confirmation, see who and why", () =>
      Effect.gen(function* () {
        const { baseUrl } = yield* TestEnv
        yield* TestClock.setTime(Date.now())
        const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "boom" } })
        const agentId = yield* registerAgent(devAccount(4), agent.url, { tier: "premium" })
        const failed = yield* execute(devAccount(9), { targetAgentId: agentId, capabilityId: "echo", input: { text: "<b>fails</b>" } })
        expect(failed.status).toBe(502)
        const requestId = String(failed.body.error?.details?.requestId)
        yield* TestClock.adjust(601_000)
        yield* (yield* MachineHost).fireDue

        const browser = yield* launch
        const context = yield* step(() => browser.newContext())
        const page: Page = yield* step(() => context.newPage())
        const visited: Array<string> = []
        page.on("request", (r) => void visited.push(r.url()))
        const login = (token: string) =>
          step(async () => {
            await page.fill("input[name=token]", token)
            const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/ops/login")), page.click("button[type=submit]")])
            await page.waitForLoadState()
            return response.status()
          })

        // A wrong token: refused, no cookie.
        const first = yield* step(() => page.goto(`${baseUrl}/ops`))
        expect(first?.status()).toBe(200)
        const csp = first?.headers()["content-security-policy"] ?? ""
        expect(csp).toContain("default-src 'none'")
        expect(csp).not.toContain("unsafe-inline")
        expect(yield* login("not-the-token")).toBe(401)
        expect(yield* step(() => page.textContent("main"))).toContain("That token was refused")
        expect(yield* step(() => context.cookies())).toEqual([])

        // The right token: a signed session in an HttpOnly, SameSite=Strict cookie (not the token).
        expect(yield* login(OPERATOR_TOKEN)).toBe(303)
        const cookies = yield* step(() => context.cookies())
        expect(cookies.map((c) => c.name)).toEqual(["ops_session"])
        expect(cookies[0]).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/ops", secure: false })
        expect(cookies[0]?.value).not.toContain(OPERATOR_TOKEN)
        // The first page is what needs attention: the failed execution's refund is owed but not yet late.
        expect(yield* step(() => page.textContent("h1"))).toBe("Needs attention")
        yield* step(() => page.click("header a:text-is('Overview')"))
        // The chart: one bar per day of the last 30 (today last); the failed execution is today's bar, or yesterday's
        // when the test runs across midnight (UTC).
        const bars = page.locator("svg[aria-label='Executions per day'] rect")
        expect(yield* step(() => bars.count())).toBe(30)
        const lastTwo = yield* step(() => Promise.all([bars.nth(28).locator("title").textContent(), bars.last().locator("title").textContent()]))
        for (const title of lastTwo) expect(title).toMatch(/^\d{4}-\d{2}-\d{2}: [01]$/)
        expect(lastTwo.map((title) => Number(title?.split(": ")[1])).reduce((a, b) => a + b, 0)).toBe(1)

        // Overview → executions in "refunding" → the failed execution.
        yield* step(() => page.locator("section", { has: page.locator("h3 a", { hasText: /^execution$/ }) }).locator("a", { hasText: /^refunding$/ }).click())
        expect(yield* step(() => page.textContent("h1"))).toBe("execution in refunding")
        yield* step(() => page.click(`a:text-is("${requestId}")`))
        expect(yield* step(() => page.textContent("[data-testid=state]"))).toBe("refunding")
        const rows = () => step(() => page.locator("#history tbody tr").evaluateAll((trs) => trs.map((tr) => Array.from(tr.querySelectorAll("td"), (td: { readonly textContent: string | null }) => td.textContent ?? ""))))
        const before = yield* rows()
        expect(before.map((r) => r[3])).toContain("failed")
        expect(before.at(-1)?.[3]).toBe("refunding")

        // The lever: operator name, reason (markup in it stays text), and the confirmation box.
        const form = page.locator("form[data-lever=retry_refund]")
        const reason = "treasury topped up <script>alert(1)</script>"
        yield* step(async () => {
          await form.locator("input[name=operator]").fill("alice")
          await form.locator("input[name=reason]").fill(reason)
          await form.locator("button[type=submit]").click()
        })
        expect(page.url()).toContain(`/ops/machines/execution/${requestId}`) // the required box stopped the post
        yield* step(async () => {
          await form.locator("input[name=confirm]").check()
          await Promise.all([page.waitForURL(`**/ops/machines/execution/${requestId}`), form.locator("button[type=submit]").click()])
        })
        expect(yield* step(() => page.textContent("[role=status]"))).toContain("retry_refund: applied")
        const after = yield* rows()
        expect(after.length).toBe(before.length + 1)
        expect(after.at(-1)?.slice(1, 4)).toEqual(["REFUND_RETRY", "refunding", "refunding"])
        expect(after.at(-1)?.[5]).toBe(`retry_refund by alice: ${reason}`)
        expect(yield* step(() => page.locator("script").count())).toBe(0)
        mkdirSync("test-artifacts", { recursive: true })
        yield* step(() => page.screenshot({ path: SCREENSHOT, fullPage: true }))

        // The same record through the API: one service behind both.
        const history = yield* step(() => call(`${baseUrl}/api/v1/operator/machines/execution/actors/${requestId}/history?limit=200`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } }))
        expect(history.body.data.transitions.at(-1)).toMatchObject({ event: "REFUND_RETRY", operator: { name: "alice", action: "retry_refund", reason } })

        // A lever post without the session's CSRF token is refused, and changes nothing.
        const session = `ops_session=${cookies[0]?.value}`
        const forged = yield* step(() =>
          fetch(`${baseUrl}/ops/levers`, {
            method: "POST",
            headers: { cookie: session, "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ lever: "retry_refund", target: "x", operator: "mallory", reason: "r", confirm: "yes", csrf: "forged" })
          }))
        expect(forged.status).toBe(403)

        // Logout clears the cookie; the console asks for the token again.
        yield* step(() => Promise.all([page.waitForURL(`${baseUrl}/ops`), page.click("header button[type=submit]")]))
        expect(yield* step(() => context.cookies())).toEqual([])
        expect(yield* step(() => page.locator("input[name=token]").count())).toBe(1)
        expect(visited.length).toBeGreaterThan(5)
        expect(visited.filter((u) => u.includes(OPERATOR_TOKEN) || u.includes(encodeURIComponent(OPERATOR_TOKEN)))).toEqual([])
      }), { timeout: 180_000 })
  })
})
