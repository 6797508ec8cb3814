// The console's "needs attention" page in a real browser, on a chain of the test's own: a hanging agent (its execution
// past its deadline), a failing webhook receiver (a dead-lettered delivery), a dispute left to escalate, and a refund
// whose transaction the mempool dropped each appear with their cause; the dead delivery and the dispute are settled
// through their levers.
// Also: a machine's state diagram with live counts (a state opens its actors), search by id, and the agent page.
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, TestClock } from "effect"
import { existsSync, mkdirSync } from "node:fs"
import { type Browser, chromium, type Page } from "playwright-core"
import { createTestClient, type Hex, http } from "viem"
import { describe, it as plainIt } from "vitest"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { MachineHost } from "../../machines/Host.js"
import { Attention } from "../../services/operator/Attention.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { fakeAgent } from "../support/agents.js"
import { call, walletAuth } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { chainOn, type ProductionChain, productionChain } from "../support/productionChain.js"
import { receiver, untilReal } from "../support/receivers.js"
import { execute, registerAgent } from "../support/scenario.js"

const CHROMIUM = "/usr/bin/chromium"
const haveChromium = existsSync(CHROMIUM)
const HOUR = 3_600_000

if (!haveChromium) {
  if (process.env["CI"]) {
    plainIt("the needs-attention test needs Debian's chromium at /usr/bin/chromium (.ci/run installs it)", () => {
      throw new Error(`${CHROMIUM} is missing in CI`)
    })
  } else {
    plainIt.skip(`needs-attention browser test skipped: ${CHROMIUM} is missing (apt-get install chromium)`, () => {})
  }
}

class Own extends Context.Tag("test/OwnChain")<Own, ProductionChain>() {}
const OwnLive = Layer.scoped(Own, productionChain({ payers: 6 }))
const App = Layer.unwrapScoped(
  Effect.map(Own, (own) =>
    TestApp(
      // The agent timeout at its maximum (10 min): the hanging call stays in flight for the whole test.
      { BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", EXECUTION_TIMEOUT_MS: "600000", TREASURY_RECEIPT_WAIT_MS: "500", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" },
      { chain: chainOn(own, "devnet") }
    ))
).pipe(Layer.provideMerge(OwnLive))

const launch = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: CHROMIUM, args: process.getuid?.() === 0 ? ["--no-sandbox"] : [] })),
  (browser: Browser) => Effect.promise(() => browser.close())
)
const step = <A>(f: () => Promise<A>) => Effect.promise(f)
const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() => call(`${baseUrl}${path}`, { method: init.method ?? (init.json === undefined ? "GET" : "POST"), ...(init.json === undefined ? {} : { json: init.json }), headers: init.headers ?? {} })))

/** The needs-attention rows as { kind, actor, cause, amount }. */
const attentionRows = (page: Page) =>
  step(() =>
    page.locator("#attention tbody tr[data-kind]").evaluateAll((trs) =>
      trs.map((tr) => ({
        kind: tr.getAttribute("data-kind") ?? "",
        actor: tr.getAttribute("data-actor") ?? "",
        amount: tr.querySelector("td.num")?.textContent ?? "",
        cause: tr.querySelector("td.cause")?.textContent ?? ""
      }))))

describe.skipIf(!haveChromium)("needs attention", () => {
  layer(App)("in a browser", (it) => {
    it.scoped("a hanging agent, a failing webhook receiver, an escalated dispute and a dropped refund each show with their cause; the dead delivery is requeued and the dispute decided through their levers", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.now())
        const own = yield* Own
        const { baseUrl, sql } = yield* TestEnv
        const [ownerE, ownerF, ownerH, payerE, payerF, payerH] = own.payers
        if (ownerE === undefined || ownerF === undefined || ownerH === undefined || payerE === undefined || payerF === undefined || payerH === undefined) return yield* Effect.dieMessage("payers")

        // An agent with a webhook whose receiver answers 500, and a paid call to it that the payer then disputes.
        const echo = yield* registerAgent(ownerE, (yield* fakeAgent("echo")).url)
        const hook = yield* receiver([500])
        const subscribed = yield* api("/api/v1/webhooks", { json: { agentId: echo, url: hook.url, events: ["execution.completed"] }, headers: yield* step(() => walletAuth(ownerE, echo)) })
        expect(subscribed.status).toBe(201)
        const paid = yield* execute(payerE, { targetAgentId: echo, capabilityId: "echo", input: { text: "hi" } })
        expect(paid.status).toBe(200)
        const [tx] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${paid.body.data.requestId}`
        const opened = yield* api("/api/v1/disputes", { json: { transactionId: tx?.transactionId, reason: "quality", evidence: "wrong answer" }, headers: { "X-Client-Id": paid.headers.get("x-client-id") ?? "" } })
        expect(opened.status).toBe(201)
        const disputeId: string = opened.body.data.disputeId
        // An agent whose answer is invalid: its call fails and a refund will be owed.
        const broken = yield* registerAgent(ownerF, (yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })).url, { tier: "premium" })
        const failed = yield* execute(payerF, { targetAgentId: broken, capabilityId: "echo", input: { text: "bad" } })
        expect(failed.status).toBe(502)
        const failedId = String(failed.body.error?.details?.requestId)
        // An agent that hangs: its call stays in flight.
        const hanging = yield* registerAgent(ownerH, (yield* fakeAgent({ kind: "delay", ms: 900_000, then: "echo" })).url, { tier: "premium" })
        yield* Effect.fork(execute(payerH, { targetAgentId: hanging, capabilityId: "echo", input: { text: "wait" } }))
        const running = yield* untilReal(sql<{ id: string; state: string }>`SELECT id, state FROM executions WHERE agent_id = ${hanging}::uuid`.pipe(Effect.orDie), (rows) => rows[0]?.state === "running")
        const hangingId = running[0]?.id ?? ""

        // 11 minutes on: the hanging call is past its deadline (10 min + 1 min grace); the webhook fails 5 times.
        yield* TestClock.adjust(700_000)
        const dispatcher = yield* Dispatcher
        yield* dispatcher.dispatchDue
        for (let round = 1; round <= 5; round++) {
          yield* dispatcher.sendDue
          yield* TestClock.adjust(300_001)
        }
        expect(hook.received).toHaveLength(5)

        const browser = yield* launch
        const context = yield* step(() => browser.newContext({ viewport: { width: 1600, height: 900 } }))
        const page: Page = yield* step(() => context.newPage())
        const login = step(async () => {
          await page.goto(`${baseUrl}/ops`)
          await page.fill("input[name=token]", OPERATOR_TOKEN)
          await Promise.all([page.waitForURL(`${baseUrl}/ops`), page.click("button[type=submit]")])
        })
        yield* login
        expect(yield* step(() => page.textContent("h1"))).toBe("Needs attention")
        const first = yield* attentionRows(page)
        expect(first.find((r) => r.kind === "execution_overdue" && r.actor === hangingId)?.cause).toMatch(/still running past its deadline.*the agent has not answered/)
        // The failed call is on the first page with the payer's money held for a retry and when it goes back.
        const held = first.find((r) => r.kind === "payment_held" && r.actor === failedId)
        expect(held?.amount).toMatch(/^0\.\d{6} USDC$/)
        expect(held?.cause).toMatch(new RegExp(`^call failed; the payment of ${payerF.address} is held for a retry until \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC, then refunded$`, "i"))
        const dead = first.find((r) => r.kind === "delivery_dead")
        expect(dead?.cause).toMatch(/execution\.completed delivery to .* dead after 5 attempts: the receiver answered 500/)

        // Two days on, the timers fire: the dispute escalates, the failed call's refund is due (the hanging call's deadline
        // passes too: it is a timeout now). The refund is sent, dropped from the mempool, and not mined.
        yield* TestClock.adjust(48 * HOUR)
        const host = yield* MachineHost
        while ((yield* host.fireDue) > 0) { /* every due timer */ }
        const anvil = createTestClient({ mode: "anvil", chain: devnetChain(own.rpcUrl), transport: http(own.rpcUrl) })
        yield* step(() => anvil.setAutomine(false))
        yield* (yield* Refunds).sendDue
        const [sent] = yield* sql<{ id: string; txHash: string }>`SELECT id, tx_hash FROM treasury_txs WHERE purpose = 'refund' AND state IN ('signed', 'broadcast')`
        yield* step(() => anvil.dropTransaction({ hash: sent?.txHash as Hex }))
        yield* step(() => anvil.mine({ blocks: 1 }))
        yield* step(() => anvil.setAutomine(true))
        yield* TestClock.adjust(11 * 60_000)

        // The session (12 h) ended during those two days: log in again.
        yield* login
        const second = yield* attentionRows(page)
        expect(second.find((r) => r.kind === "dispute_escalated" && r.actor === disputeId)?.cause).toMatch(/dispute escalated \(quality\).*waiting for an operator's resolution/)
        expect(second.find((r) => r.kind === "refund_unconfirmed" && r.actor === failedId)?.cause).toContain(`sent as ${sent?.txHash}, not confirmed`)
        expect(second.find((r) => r.kind === "treasury_stuck" && r.actor === sent?.id)?.cause).toMatch(/^refund transaction 0x[0-9a-f]{64} \(nonce \d+\) (signed|broadcast) and not mined/)
        expect(second.some((r) => r.kind === "execution_overdue")).toBe(false)
        // The failed call's money went back (refunding); the hanging call timed out and its payment is held in turn.
        expect(second.some((r) => r.kind === "payment_held" && r.actor === failedId)).toBe(false)
        expect(second.find((r) => r.kind === "payment_held" && r.actor === hangingId)?.cause).toMatch(/^call timed out; the payment of 0x[0-9a-f]{40} is held for a retry until /i)
        expect(second.find((r) => r.kind === "dispute_escalated")?.amount).toBe("0.011000 USDC")
        // The same facts as numbers per kind (what a gauge exposes).
        const counts = yield* (yield* Attention).counts()
        for (const kind of ["dispute_escalated", "refund_unconfirmed", "treasury_stuck", "delivery_dead"] as const) {
          expect(counts[kind]).toBe(second.filter((r) => r.kind === kind).length)
        }
        expect(counts.execution_overdue).toBe(0)
        const report = (yield* api("/api/v1/operator/attention", { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })).body.data
        expect(report.counts).toEqual(counts)
        expect(report.items.find((i: { kind: string }) => i.kind === "dispute_escalated")).toMatchObject({ actorId: disputeId, amount: "0.011000", lever: "resolve_dispute" })
        // Ranked by money at stake: never a smaller amount above a larger one.
        const amounts = second.map((r) => Number(r.amount.replace(" USDC", "") || "0"))
        expect(amounts).toEqual([...amounts].sort((a, b) => b - a))
        mkdirSync("test-artifacts", { recursive: true })
        yield* step(() => page.screenshot({ path: "test-artifacts/ops-attention.png", fullPage: true }))

        // The lever: the receiver is fixed; the dead delivery's row leads to its requeue form.
        hook.answer.splice(0, hook.answer.length, 200)
        yield* step(() => page.locator(`#attention tr[data-kind=delivery_dead] a.lever-link[data-lever=requeue_delivery]`).click())
        const form = page.locator("form[data-lever=requeue_delivery]")
        yield* step(async () => {
          await form.locator("input[name=operator]").fill("bob")
          await form.locator("input[name=reason]").fill("receiver fixed")
          await form.locator("input[name=confirm]").check()
          await Promise.all([page.waitForURL(`**/ops/machines/webhookDelivery/${dead?.actor}`), form.locator("button[type=submit]").click()])
        })
        expect(yield* step(() => page.textContent("[role=status]"))).toContain("requeue_delivery: applied")
        // The dead delivery says why it died.
        expect(yield* step(() => page.locator("tr", { has: page.locator("th", { hasText: /^lastError$/ }) }).locator("td").textContent())).toMatch(/500/)
        yield* dispatcher.sendDue
        expect(hook.received).toHaveLength(6)
        yield* step(() => page.goto(`${baseUrl}/ops`))
        expect((yield* attentionRows(page)).some((r) => r.kind === "delivery_dead")).toBe(false)

        // The escalated dispute is decided through its lever (for the agent: the frozen money is released).
        yield* step(() => page.locator(`#attention tr[data-kind=dispute_escalated] a.lever-link[data-lever=resolve_dispute]`).click())
        const decide = page.locator("form[data-lever=resolve_dispute]")
        yield* step(async () => {
          await decide.locator("input[name=operator]").fill("carol")
          await decide.locator("select[name=resolution]").selectOption("resolved_agent")
          await decide.locator("input[name=reason]").fill("the answer matched the request")
          await decide.locator("input[name=confirm]").check()
          await Promise.all([page.waitForURL(`**/ops/machines/dispute/${disputeId}`), decide.locator("button[type=submit]").click()])
        })
        expect(yield* step(() => page.textContent("[role=status]"))).toContain("resolve_dispute: applied")
        expect(yield* step(() => page.textContent("[data-testid=state]"))).toBe("resolved_agent")
        yield* step(() => page.goto(`${baseUrl}/ops`))
        expect((yield* attentionRows(page)).some((r) => r.kind === "dispute_escalated")).toBe(false)

        // The execution machine's diagram: live counts, the problem state marked; clicking it lists its actors.
        yield* step(() => page.goto(`${baseUrl}/ops/machines/execution`))
        const refunding = page.locator("svg.diagram a[data-state=refunding]")
        expect(yield* step(() => refunding.getAttribute("data-problem"))).toBe("yes")
        expect(yield* step(() => refunding.locator("[data-count]").getAttribute("data-count"))).toBe("1")
        expect(yield* step(() => page.locator("svg.diagram g.edge[data-from=running][data-to='completed.awaitingPayment']").count())).toBe(1)
        yield* step(() => page.screenshot({ path: "test-artifacts/ops-diagram.png", fullPage: true }))
        yield* step(() => Promise.all([page.waitForURL("**/ops/machines/execution?state=refunding"), refunding.click()]))
        expect(yield* step(() => page.locator("#actors tbody a", { hasText: failedId }).count())).toBe(1)

        // Search: a transaction hash finds the refund and its treasury transaction; an agent id opens the agent's page.
        yield* step(async () => {
          await page.fill("header input[name=q]", sent?.txHash ?? "")
          await Promise.all([page.waitForURL("**/ops/search?q=*"), page.press("header input[name=q]", "Enter")])
        })
        const hits = yield* step(() => page.locator("#hits tbody a").evaluateAll((as) => as.map((a) => a.getAttribute("href"))))
        expect(hits.sort()).toEqual([`/ops/machines/execution/${failedId}`, `/ops/machines/treasury/${sent?.id}`].sort())
        yield* step(() => page.goto(`${baseUrl}/ops/search?q=${echo}`))
        expect(page.url()).toBe(`${baseUrl}/ops/agents/${echo}`)
        expect(yield* step(() => page.locator("#disputes tbody a", { hasText: disputeId }).count())).toBe(1)
        expect(yield* step(() => page.locator("#webhooks tbody").textContent())).toContain(hook.url)
        expect(yield* step(() => page.locator("script").count())).toBe(0)
      }), { timeout: 240_000 })
  })
})
