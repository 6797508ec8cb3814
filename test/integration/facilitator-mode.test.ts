// FACILITATOR_URL with a treasury key: the unmodified official x402 facilitator settles incoming payments, the treasury
// key pays everything out, and whatever the facilitator answers (success, failure, a lie, an error) the chain decides.
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, TestClock } from "effect"
import { createTestClient, getAddress, type Hex, http, parseEther } from "viem"
import { generatePrivateKey } from "viem/accounts"
import { inject } from "vitest"
import { Chain, connectChain } from "../../layers/Chain.js"
import { MachineHost } from "../../machines/Host.js"
import { Payments } from "../../services/payments/Payments.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { devAccount, frontRunAuthorization, publicClient, usdcBalance } from "../support/clients.js"
import { type OfficialFacilitator, startOfficialFacilitator } from "../support/facilitator.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.01 + the 10% client fee

class Facilitator extends Context.Tag("test/Facilitator")<Facilitator, OfficialFacilitator>() {}

const FacilitatorLive = Layer.scoped(
  Facilitator,
  Effect.acquireRelease(Effect.promise(() => startOfficialFacilitator(inject("rpcUrl"))), (f) => Effect.promise(() => f.close()))
)

/** A treasury key made for this run (never a dev key), with gas: it receives what the facilitator settles and pays out. */
const FreshTreasury = Layer.effect(
  Chain,
  Effect.gen(function* () {
    const key = generatePrivateKey()
    const chain = yield* connectChain({
      mode: "rpc",
      rpcUrl: inject("rpcUrl"),
      usdcAddress: inject("usdcAddress"),
      signerKey: Option.some(key),
      treasuryAddress: Option.none(),
      settlement: "facilitator"
    })
    const anvil = createTestClient({ mode: "anvil", transport: http(inject("rpcUrl")) })
    yield* Effect.promise(() => anvil.setBalance({ address: chain.treasury, value: parseEther("10") }))
    return chain
  })
)

const App = Layer.unwrapScoped(
  Effect.map(Facilitator, (facilitator) =>
    TestApp(
      // Payments valid for 15 minutes: the recovery passes below move the test clock several minutes past the calls.
      { BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", PAYMENT_TIMEOUT_SECONDS: "900", FACILITATOR_URL: facilitator.url },
      { chain: FreshTreasury }
    ))
).pipe(Layer.provideMerge(FacilitatorLive))

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const senderOf = (hash: string) => Effect.promise(() => publicClient().getTransaction({ hash: hash as Hex })).pipe(Effect.map((tx) => getAddress(tx.from)))

layer(App)("facilitator mode with a treasury key", (it) => {
  it.scoped("the official facilitator settles registrations and calls; the treasury key refunds failed calls; ledger = chain", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql, chain } = yield* TestEnv
      const facilitator = yield* Facilitator
      expect(chain.settlement).toBe("facilitator")
      const failing = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
      const agentId = yield* registerAgent(devAccount(3), failing.url, { tier: "premium" })
      const [registration] = yield* sql<{ txHash: string }>`SELECT tx_hash FROM payments WHERE purpose = 'registration'`
      expect(yield* senderOf(registration!.txHash)).toBe(getAddress(facilitator.address))

      const payer = devAccount(4)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const ids = yield* Effect.forEach([0, 1, 2, 3], (i) =>
        Effect.map(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: `n${i}` } }), (r) => {
          expect(r.status, JSON.stringify(r.body)).toBe(502)
          return String(r.body.error?.details?.requestId)
        }), { concurrency: 1 }) // one at a time: the facilitator's own signer has no nonce manager (concurrent settles race it)
      expect((yield* Effect.promise(() => usdcBalance(payer.address))) - before).toBe(-4n * PRICE)
      // The retry windows close; each failed call owes its refund, which only the treasury key can pay.
      yield* TestClock.adjust(601_000)
      const host = yield* MachineHost
      while ((yield* host.fireDue) > 0) { /* every window closes */ }
      yield* (yield* Refunds).sendDue
      const worker = yield* TreasuryWorker
      for (let i = 0; i < 5; i++) yield* worker.processDue
      const refunds = yield* sql<{ status: string; txHash: string }>`SELECT status, tx_hash FROM refunds WHERE execution_id IN ${sql.in(ids)}`
      expect(refunds.map((r) => r.status)).toEqual(["confirmed", "confirmed", "confirmed", "confirmed"])
      for (const refund of refunds) expect(yield* senderOf(refund.txHash)).toBe(chain.treasury)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })

  it.scoped("a front-runner submits the authorization while the facilitator settles: the call completes with that money", () =>
    Effect.gen(function* () {
      yield* realNow
      const facilitator = yield* Facilitator
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(5), echo.url, { tier: "premium" })
      const payer = devAccount(6)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      let frontRun: string | undefined
      facilitator.setMode({
        kind: "after",
        before: async ({ paymentPayload: { payload }, paymentRequirements }) => {
          const a = payload.authorization
          const sent = await frontRunAuthorization({
            asset: getAddress(String(paymentRequirements["asset"])),
            payer: a["from"] ?? "",
            payTo: getAddress(a["to"] ?? ""),
            amount: BigInt(a["value"] ?? "0"),
            validAfter: BigInt(a["validAfter"] ?? "0"),
            validBefore: BigInt(a["validBefore"] ?? "0"),
            nonce: (a["nonce"] ?? "0x") as Hex,
            signature: payload.signature
          })
          frontRun = sent.hash
        }
      })
      const answer = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "raced" } })
      facilitator.setMode({ kind: "honest" })
      expect(frontRun).toBeDefined()
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      expect(answer.body.data.output).toMatchObject({ echo: { text: "raced" } })
      expect((yield* Effect.promise(() => usdcBalance(payer.address))) - before).toBe(-PRICE)
      const { sql } = yield* TestEnv
      const [payment] = yield* sql<{ status: string; txHash: string }>`SELECT p.status, p.tx_hash FROM payments p
        JOIN executions e ON e.payment_id = p.id WHERE e.id = ${String(answer.body.data.requestId)}`
      expect(payment).toEqual({ status: "settled", txHash: frontRun })
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })

  it.scoped("a facilitator that errors or answers success for a payment it never made: no output without money, settled once on recovery", () =>
    Effect.gen(function* () {
      yield* realNow
      const facilitator = yield* Facilitator
      const { sql } = yield* TestEnv
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(7), echo.url, { tier: "premium" })
      const payer = devAccount(8)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const requestIds: Array<string> = []
      for (const mode of [{ kind: "lie" }, { kind: "status", status: 503 }] as const) {
        facilitator.setMode(mode)
        const answer = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: mode.kind } })
        // Nothing on chain: the output is not released, whatever the facilitator said.
        expect(answer.body.data?.output, JSON.stringify(answer.body)).toBeUndefined()
        requestIds.push(String(answer.body.data?.requestId ?? answer.body.error?.details?.requestId))
      }
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      // The facilitator recovers; the recovery pass settles each held payment once.
      facilitator.setMode({ kind: "honest" })
      const payments = yield* Payments
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust(120_000)
        yield* payments.recoverDue
      }
      const rows = yield* sql<{ status: string; paymentStatus: string }>`SELECT e.status, p.status AS payment_status
        FROM executions e JOIN payments p ON p.id = e.payment_id WHERE e.id IN ${sql.in(requestIds)}`
      expect(rows.map((r) => r.paymentStatus)).toEqual(["settled", "settled"])
      expect(rows.map((r) => r.status)).toEqual(["completed", "completed"])
      expect((yield* Effect.promise(() => usdcBalance(payer.address))) - before).toBe(-2n * PRICE)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })
})
