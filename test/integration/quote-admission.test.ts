// A payer's quote does not depend on strangers (docs/security.md): unpaid requests hold at most their share of a dynamic
// agent's quote slots, each client (a verified payer, or else its address: X-Forwarded-For here, TRUST_PROXY on) has
// at most QUOTE_CLIENT_IN_FLIGHT in flight per agent and QUOTE_CLIENT_PER_WINDOW per window, and a payment is verified
// (signature, amount, funds) before its quote is asked. The agent holds quotes whose input says `holdQuote` (a slow
// agent) until the test releases them.
import { afterAll, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { creditSpendTypes, inputSha256 } from "../../services/remainders/CreditSpends.js"
import { payoutDomain } from "../../services/withdrawals/PayoutAuthorization.js"
import { call, devAccount, paidCall, signPayment, strangerAccount } from "../support/clients.js"
import { capability } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { startMeteredAgent } from "../support/meteredAgent.js"
import { registerAgent } from "../support/scenario.js"

const quoted = capability({
  id: "quoted", name: "Quoted", description: "dynamic", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "dynamic", basePrice: "0.01", currency: "USDC", maxPrice: "0.05" }
})
const QUOTED_MAX = 51_000n // 0.001 fee + maxPrice 0.05

type Answer = Awaited<ReturnType<typeof call>>

/** Polls (an outside server's state, not a machine's clock) until `done`, at most ~30 s. */
const until = (done: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1_500 && !done(); i++) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    if (!done()) return yield* Effect.dieMessage("condition not reached in time")
  })

const accepts = (answer: Answer) => (answer.body as unknown as { accepts: Array<{ maxAmountRequired: string; description: string }> }).accepts[0]

layer(TestApp({ TRUST_PROXY: "true", QUOTE_CLIENT_PER_WINDOW: "5", QUOTE_WINDOW_SECONDS: "3600", EXECUTION_TIMEOUT_MS: "10000", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }), { excludeTestServices: true, timeout: 120_000 })("quote admission", (it) => {
  let shared: { readonly agent: Awaited<ReturnType<typeof startMeteredAgent>>; readonly agentId: string } | undefined
  afterAll(() => shared?.agent.close())
  const agentOnce = Effect.gen(function* () {
    if (shared !== undefined) return shared
    const agent = yield* Effect.promise(startMeteredAgent)
    const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium", capabilities: [quoted] })
    shared = { agent, agentId }
    return shared
  })
  const setUp = Effect.gen(function* () {
    const env = yield* TestEnv
    const { baseUrl } = env
    const { agent, agentId } = yield* agentOnce
    // Whatever a test leaves held is answered when it ends.
    yield* Effect.addFinalizer(() => Effect.sync(agent.releaseQuotes))
    const url = `${baseUrl}/api/v1/execute`
    const body = (input: Record<string, unknown>) => ({ targetAgentId: agentId, capabilityId: "quoted", input })
    /** An unpaid request from `address`. */
    const unpaid = (input: Record<string, unknown>, address: string) =>
      call(url, { method: "POST", json: body(input), headers: { "x-forwarded-for": address } })
    /** A request paid with a hand-signed X-PAYMENT for the maximum, from `address`. */
    const paidBy = async (payer: ReturnType<typeof strangerAccount>, input: Record<string, unknown>, address: string) => {
      const { header } = await signPayment({ account: payer, value: QUOTED_MAX })
      return call(url, { method: "POST", json: body(input), headers: { "x-forwarded-for": address, "x-payment": header } })
    }
    /** A request paid from `payer`'s credit (a valid PayerCreditSpend signature for this very call), from `address`. */
    const creditBy = async (payer: ReturnType<typeof strangerAccount>, input: Record<string, unknown>, address: string) => {
      const { chain } = env
      const nonce = `0x${randomBytes(32).toString("hex")}` as const
      const validBefore = Math.floor(Date.now() / 1000) + 300
      const signature = await payer.signTypedData({
        domain: payoutDomain(chain.chainId, chain.treasury),
        types: creditSpendTypes,
        primaryType: "PayerCreditSpend",
        message: { payer: payer.address, agentId, capabilityId: "quoted", inputSha256: inputSha256(input), maxAmount: QUOTED_MAX, nonce, validBefore: BigInt(validBefore) }
      })
      const header = Buffer.from(JSON.stringify({ payer: payer.address, maxAmount: QUOTED_MAX.toString(), nonce, validBefore, signature })).toString("base64")
      return call(url, { method: "POST", json: body(input), headers: { "x-forwarded-for": address, "x-credit-payment": header } })
    }
    const asked = (tag: string) => agent.quotes.filter((q) => (q as { tag?: string }).tag === tag).length
    return { agent, url, body, unpaid, paidBy, creditBy, asked } as const
  })

  it.scoped("16 unpaid requests with different inputs hold quote slots of a slow dynamic agent: a paying client still gets its 402, then its result", () =>
    Effect.gen(function* () {
      const { agent, url, body, unpaid } = yield* setUp
      // The attack: sixteen unpaid requests, each from its own address, each input new (no cache), quotes held.
      const answered: Array<Answer> = []
      const attack = Array.from({ length: 16 }, (_, i) =>
        unpaid({ quote: "0.02", holdQuote: true, tag: "attack", n: i }, `10.0.1.${i + 1}`).then((answer) => {
          answered.push(answer)
          return answer
        }))
      // Every attacking request is either held at the agent or already answered.
      yield* until(() => agent.held() + answered.length === 16)
      const heldByStrangers = agent.held()

      // The payer: its 402 (for the maximum), then its result, paid by the official x402 client.
      const input = { quote: "0.02", units: "5000", tag: "payer" }
      const challenge = yield* Effect.promise(() => unpaid(input, "10.0.2.1"))
      expect(challenge.status, JSON.stringify(challenge.body)).toBe(402)
      expect(BigInt(accepts(challenge)?.maxAmountRequired ?? "0")).toBe(QUOTED_MAX)
      const paid = yield* Effect.promise(() => paidCall(devAccount(2), url, { json: body(input), headers: { "x-forwarded-for": "10.0.2.1" } }))
      expect(paid.status, JSON.stringify(paid.body)).toBe(200)
      // Its quote (0.02) caps the charge; it used 0.005 of agent fee: 0.006 with the platform fee, the rest goes back.
      expect(paid.body.data.metering).toMatchObject({ charged: "0.006000", returned: "0.045000", capped: false })

      // The strangers held no more than their share (QUOTE_UNVERIFIED_IN_FLIGHT, 4); the others got the challenge
      // without a quote (the maximum alone), and the held ones theirs once the agent answered.
      expect(heldByStrangers).toBe(4)
      agent.releaseQuotes()
      const strangers = yield* Effect.promise(() => Promise.all(attack))
      expect(strangers.map((s) => s.status)).toEqual(Array<number>(16).fill(402))
      expect(strangers.filter((s) => accepts(s)?.description.includes("quoted")).length).toBe(4)
    }))

  it.scoped("an unpaid client (by its address) has at most 2 quotes in flight per agent: the next is 429 QUOTE_RATE_LIMITED with Retry-After, the agent not asked; another address is not affected", () =>
    Effect.gen(function* () {
      const { agent, unpaid, asked } = yield* setUp
      const before = agent.held()
      const holding = [1, 2].map((n) => unpaid({ holdQuote: true, tag: "in-flight", n }, "10.0.3.1"))
      yield* until(() => agent.held() === before + 2)
      const third = yield* Effect.promise(() => unpaid({ tag: "in-flight-third" }, "10.0.3.1"))
      expect(third.status).toBe(429)
      expect(third.body.error?.code).toBe("QUOTE_RATE_LIMITED")
      expect(third.body.error?.details).toMatchObject({ limit: "in_flight", retryAfterSeconds: 5 })
      expect(third.headers.get("retry-after")).toBe("5")
      expect(asked("in-flight-third")).toBe(0)
      // The same request from another address gets its 402 with the agent's quote.
      const other = yield* Effect.promise(() => unpaid({ tag: "in-flight-third" }, "10.0.3.2"))
      expect(other.status).toBe(402)
      expect(accepts(other)?.description).toContain("quoted")
      agent.releaseQuotes()
      expect((yield* Effect.promise(() => Promise.all(holding))).map((h) => h.status)).toEqual([402, 402])
    }))

  it.scoped("one client causes at most QUOTE_CLIENT_PER_WINDOW (5) quote requests per window: the 6th new input is 429 with the window's Retry-After; a repeat is answered from the cache", () =>
    Effect.gen(function* () {
      const { unpaid, asked } = yield* setUp
      for (let n = 0; n < 5; n++) {
        const answer = yield* Effect.promise(() => unpaid({ tag: "rate", n }, "10.0.4.1"))
        expect(answer.status).toBe(402)
      }
      const sixth = yield* Effect.promise(() => unpaid({ tag: "rate", n: 5 }, "10.0.4.1"))
      expect(sixth.status).toBe(429)
      expect(sixth.body.error?.details).toMatchObject({ limit: "rate" })
      const retryAfter = Number(sixth.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(3_600)
      // A request already quoted costs the agent nothing: answered from the cache, not counted.
      expect((yield* Effect.promise(() => unpaid({ tag: "rate", n: 0 }, "10.0.4.1"))).status).toBe(402)
      expect(asked("rate")).toBe(5)
    }))

  it.scoped("a payment or credit signature that does not verify as a payer with funds is refused before any quote; a verified payer's quotes count against the payer wherever it calls from", () =>
    Effect.gen(function* () {
      const { agent, unpaid, paidBy, creditBy, asked } = yield* setUp
      const stranger = yield* Effect.promise(() => paidBy(strangerAccount(), { holdQuote: true, tag: "unfunded" }, "10.0.5.1"))
      expect(stranger.status).toBe(402)
      expect(stranger.body.error?.details.reason).toBe("insufficient_funds")
      const noCredit = yield* Effect.promise(() => creditBy(strangerAccount(), { holdQuote: true, tag: "unfunded" }, "10.0.5.1"))
      expect(noCredit.status).toBe(402)
      expect(noCredit.body.error?.details.reason).toBe("insufficient_credit")
      expect(asked("unfunded")).toBe(0)

      const payer = devAccount(3)
      const before = agent.held()
      const holding = [1, 2].map((n) => paidBy(payer, { quote: "0.01", holdQuote: true, tag: "payer-held", n }, "10.0.5.2"))
      yield* until(() => agent.held() === before + 2)
      // The same payer from another address: over its own in-flight limit, nothing charged, the agent not asked.
      const third = yield* Effect.promise(() => paidBy(payer, { quote: "0.01", tag: "payer-third" }, "10.0.5.3"))
      expect(third.status).toBe(429)
      expect(third.body.error?.code).toBe("QUOTE_RATE_LIMITED")
      expect(asked("payer-third")).toBe(0)
      // The payer's address is not the payer: an unpaid request from it is quoted.
      expect((yield* Effect.promise(() => unpaid({ tag: "payer-address" }, "10.0.5.2"))).status).toBe(402)
      expect(asked("payer-address")).toBe(1)
      agent.releaseQuotes()
      expect((yield* Effect.promise(() => Promise.all(holding))).map((h) => h.status)).toEqual([200, 200])
    }))
})
