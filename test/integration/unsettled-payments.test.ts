// A payer's accepted but unsettled payments count against its balance: the reservation statement refuses a payment
// that the balance the chain showed covers only without them (402 insufficient_funds, nothing reserved), under
// concurrency too; an expired authorization no longer counts; a key payer's second payment while its first is still
// settling is refused before the agent hears of it.
import { expect, layer } from "@effect/vitest"
import { Effect, Either, Fiber, TestClock } from "effect"
import { getAddress, type Hex } from "viem"
import { inject } from "vitest"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { Payments } from "../../services/payments/Payments.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, signPayment, strangerAccount, TREASURY, usdcBalance, walletFor } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { randomBytes } from "node:crypto"

const PRICE = 11_000n // 0.01 + the 10% client fee

/** Our clock starts at the real time (payments are signed against it). */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** Holds the settlement of `payer`'s first payment after `arm(payer)` until `open()`; `reached` resolves when it waits. */
const makeSettleGate = () => {
  let payer: string | undefined
  let release: () => void = () => {}
  let reach: () => void = () => {}
  let opened = Promise.resolve()
  let reached = Promise.resolve()
  return {
    arm: (who: string) => {
      payer = who.toLowerCase()
      opened = new Promise<void>((resolve) => (release = resolve))
      reached = new Promise<void>((resolve) => (reach = resolve))
    },
    reached: () => reached,
    open: () => release(),
    beforeSettle: (p: VerifiedPayment) =>
      Effect.suspend(() => {
        if (payer === undefined || p.payer !== payer) return Effect.void
        payer = undefined
        reach()
        return Effect.promise(() => opened)
      })
  }
}
const gate = makeSettleGate()

/** A payment of `amount` by a made-up payer, as verification would hand it over (with the balance it read). */
const verified = (payer: `0x${string}`, amount: bigint, balance: bigint | undefined, validBefore: bigint): VerifiedPayment => ({
  payer,
  payTo: TREASURY,
  asset: getAddress(inject("usdcAddress")),
  network: "base-sepolia",
  amount,
  nonce: `0x${randomBytes(32).toString("hex")}` as Hex,
  validAfter: 0n,
  validBefore,
  signature: `0x${"11".repeat(65)}` as Hex,
  headerSha256: randomBytes(32).toString("hex"),
  ...(balance === undefined ? {} : { balance })
})

const randomPayer = () => `0x${randomBytes(20).toString("hex")}` as `0x${string}`
const inAnHour = () => BigInt(Math.floor(Date.now() / 1000) + 3_600)

layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }, { faults: { beforeSettle: gate.beforeSettle } }))(
  "unsettled payments count against the payer's balance",
  (it) => {
    it.effect("eight concurrent reservations of one payer whose balance covers three: three are reserved, five refused with what is unsettled", () =>
      Effect.gen(function* () {
        yield* realNow
        const payments = yield* Payments
        const payer = randomPayer()
        const results = yield* Effect.all(
          Array.from({ length: 8 }, (_, i) => Effect.either(payments.reserve(verified(payer, PRICE, 3n * PRICE, inAnHour()), "execution", `req_unsettled_${i}`))),
          { concurrency: "unbounded" }
        )
        expect(results.filter(Either.isRight)).toHaveLength(3)
        const refused = results.filter(Either.isLeft).map((r) => r.left).filter((e) => e._tag === "PaymentRejected")
        expect(refused.map((r) => r.reason)).toEqual(Array.from({ length: 5 }, () => "insufficient_funds"))
        expect(refused[0]!.details).toMatchObject({ balance: (3n * PRICE).toString(), unsettled: (3n * PRICE).toString(), required: PRICE.toString(), retryable: true })
        const { sql } = yield* TestEnv
        expect(yield* sql`SELECT 1 FROM payments WHERE payer = ${payer}`).toHaveLength(3)
      }))

    it.effect("an unsettled payment whose authorization expired no longer counts; another payer's never does", () =>
      Effect.gen(function* () {
        yield* realNow
        const payments = yield* Payments
        const payer = randomPayer()
        yield* payments.reserve(verified(payer, PRICE, undefined, BigInt(Math.floor(Date.now() / 1000) - 5)), "execution", "req_expired")
        yield* payments.reserve(verified(randomPayer(), PRICE, PRICE, inAnHour()), "execution", "req_other_payer")
        const id = yield* payments.reserve(verified(payer, PRICE, PRICE, inAnHour()), "execution", "req_fits")
        expect(id).toMatch(/^pay_/)
        const again = yield* Effect.either(payments.reserve(verified(payer, PRICE, PRICE, inAnHour()), "execution", "req_does_not_fit"))
        expect(Either.isLeft(again) && again.left._tag === "PaymentRejected" ? again.left.reason : "reserved").toBe("insufficient_funds")
      }))

    it.scoped("a key payer funded for one price pays twice while its first payment settles: the second is refused with 402 before the agent is called", () =>
      Effect.gen(function* () {
        yield* realNow
        const { baseUrl, sql } = yield* TestEnv
        const echo = yield* fakeAgent("echo")
        const agentId = yield* registerAgent(devAccount(3), echo.url, { tier: "premium" })
        const payer = strangerAccount()
        yield* Effect.promise(async () => {
          const funder = walletFor(devAccount(8))
          const hash = await funder.writeContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "transfer", args: [payer.address, PRICE] })
          await funder.waitForTransactionReceipt({ hash })
        })
        const pay = (text: string) =>
          Effect.promise(async () => {
            const { header } = await signPayment({ account: payer, value: PRICE })
            return call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text } }, headers: { "X-PAYMENT": header } })
          })

        gate.arm(payer.address)
        const first = yield* Effect.fork(pay("first"))
        yield* Effect.promise(() => gate.reached())
        // The first payment is reserved, its transfer not sent: the chain still shows the whole balance.
        expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(PRICE)
        const second = yield* pay("second")
        expect(second.status, JSON.stringify(second.body)).toBe(402)
        expect(second.body.error?.details).toMatchObject({ reason: "insufficient_funds", unsettled: PRICE.toString(), required: PRICE.toString() })
        gate.open()
        const answered = yield* Fiber.join(first)
        expect([answered.status, answered.body.data?.settlement?.status], JSON.stringify(answered.body)).toEqual([200, "settled"])
        expect(echo.calls.map((c) => c.body)).toEqual([expect.objectContaining({ input: { text: "first" } })])
        expect(yield* sql`SELECT status FROM payments WHERE payer = ${payer.address.toLowerCase()}`).toEqual([{ status: "settled" }])
        expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(0n)
        expect(yield* ledgerMatchesChain).toBe(0n)
      }), { timeout: 60_000 })
  }
)
