// The treasury running low on ETH for gas: /health says degraded and the gauges say why while it can still pay for
// some transactions (before sends fail), and it recovers once topped up.
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { createTestClient, http, parseEther } from "viem"
import { generatePrivateKey } from "viem/accounts"
import { inject } from "vitest"
import { Chain, connectChain } from "../../layers/Chain.js"
import { GasWatch } from "../../services/treasury/GasWatch.js"
import { call } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"

const anvil = createTestClient({ mode: "anvil", transport: http(inject("rpcUrl")) })

/** A treasury key of its own (its gas is the test's to set), settling locally. */
const FreshTreasury = Layer.effect(
  Chain,
  Effect.gen(function* () {
    const chain = yield* connectChain({
      mode: "devnet",
      rpcUrl: inject("rpcUrl"),
      usdcAddress: inject("usdcAddress"),
      signerKey: Option.some(generatePrivateKey()),
      treasuryAddress: Option.none()
    })
    yield* Effect.promise(() => anvil.setBalance({ address: chain.treasury, value: parseEther("1") }))
    return chain
  })
)

const metric = (text: string, name: string) => text.split("\n").find((line) => line.startsWith(`${name} `))?.split(" ")[1]

layer(TestApp({ BACKGROUND_WORKERS: "false", TREASURY_GAS_LOW_TRANSACTIONS: "50" }, { chain: FreshTreasury }), { excludeTestServices: true })(
  "treasury gas",
  (it) => {
    it.effect("low ETH degrades /health and sets the gauges while transactions can still be paid; a top-up clears it", () =>
      Effect.gen(function* () {
        const { baseUrl, chain } = yield* TestEnv
        const watch = yield* GasWatch
        const plenty = yield* watch.check
        expect(Option.map(plenty, (s) => s.low)).toEqual(Option.some(false))
        const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
        expect(health.body.data).toMatchObject({ status: "ok", gas: { low: false } })

        // Enough for 10 payout-sized transactions at today's fees: still able to send, below the threshold of 50.
        const perTransaction = Option.getOrThrow(plenty).perTransactionWei
        yield* Effect.promise(() => anvil.setBalance({ address: chain.treasury, value: perTransaction * 10n }))
        const low = Option.getOrThrow(yield* watch.check)
        expect(low).toMatchObject({ low: true })
        expect(low.transactionsLeft).toBeGreaterThanOrEqual(9n)
        expect(low.transactionsLeft).toBeLessThan(50n)
        const degraded = yield* Effect.promise(() => call(`${baseUrl}/health`))
        expect(degraded.status).toBe(200)
        expect(degraded.body.data).toMatchObject({ status: "degraded", gas: { low: true, transactionsLeft: low.transactionsLeft.toString() } })
        const metrics = yield* Effect.promise(() => fetch(`${baseUrl}/metrics`).then((r) => r.text()))
        expect(metric(metrics, "treasury_gas_low")).toBe("1")
        expect(metric(metrics, "treasury_gas_transactions_left")).toBe(low.transactionsLeft.toString())

        yield* Effect.promise(() => anvil.setBalance({ address: chain.treasury, value: parseEther("1") }))
        yield* watch.check
        const again = yield* Effect.promise(() => call(`${baseUrl}/health`))
        expect(again.body.data).toMatchObject({ status: "ok", gas: { low: false } })
      }), { timeout: 60_000 })
  }
)
