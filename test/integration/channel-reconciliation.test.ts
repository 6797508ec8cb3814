// Batch-settlement channels in the reconciliation: rows, the ledger's channel receivable and the contract agree (a claim
// built and not yet on chain is in flight, not drift); a chain whose totalClaimed runs ahead of our rows, or a ledger
// that books what no row charged, is drift, confirmed by the worker's second look and shown on /metrics, /health and
// the operator's reconciliation endpoint.
import { expect, layer } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { createTestClient, http, parseEther } from "viem"
import { generatePrivateKey } from "viem/accounts"
import { inject } from "vitest"
import { Chain, connectChain } from "../../layers/Chain.js"
import { Ledger } from "../../services/ledger/Ledger.js"
import { ChannelReconciliation } from "../../services/treasury/ChannelReconciliation.js"
import { channelsTo, insertChannel, postReceivable } from "../support/channelFixtures.js"
import { call, devAccount } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { recordingLogs } from "../support/logs.js"

const anvil = createTestClient({ mode: "anvil", transport: http(inject("rpcUrl")) })

/** A treasury of its own: the contract's claimed-unsettled pool for it starts at zero whatever other files did. */
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

/** Waits (real time) until the pass sleeps before its second look, then moves the clock past it. */
const passWithSecondLook = Effect.gen(function* () {
  const channels = yield* ChannelReconciliation
  const now = yield* Clock.currentTimeMillis
  const fiber = yield* Effect.fork(channels.pass)
  const deadline = Date.now() + 20_000
  // The pass's own sleep: 20 s from now (other fibers of the app sleep on the same clock).
  while (![...(yield* TestClock.sleeps())].some((t) => t - now === 20_000)) {
    if (Date.now() > deadline) return yield* Effect.dieMessage("the pass never waited for its second look")
    yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
  }
  yield* TestClock.adjust("21 seconds")
  yield* Fiber.join(fiber)
})

const metric = (text: string, line: string) => text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1]
const operator = { authorization: `Bearer ${OPERATOR_TOKEN}` }

layer(TestApp({ BACKGROUND_WORKERS: "false", METRICS_DB_CACHE_MS: "0", LOG_FORMAT: "json" }, { chain: FreshTreasury }))("channel reconciliation", (it) => {
  it.effect("rows, ledger and contract agree: no drift, and a claim built but not yet on chain is in flight", () =>
    Effect.gen(function* () {
      const { sql, chain, baseUrl } = yield* TestEnv
      const channels = channelsTo({ treasury: chain.treasury, payer: devAccount(6), authorizer: devAccount(7), relayer: devAccount(8) })
      // A: 1 USDC deposited, 0.5 charged, 0.3 claimed on chain. B: 0.4 deposited, 0.2 charged and claimed by us, the claim not sent.
      const a = yield* Effect.promise(() => channels.open("recon a", 1_000_000n))
      yield* Effect.promise(() => channels.claim(a.config, 500_000n, 300_000n))
      yield* insertChannel(sql, { id: a.id, network: chain.network, config: a.config, status: "open", balance: 1_000_000n, charged: 500_000n, claimed: 300_000n })
      const b = yield* Effect.promise(() => channels.open("recon b", 400_000n))
      yield* insertChannel(sql, { id: b.id, network: chain.network, config: b.config, status: "open", balance: 400_000n, charged: 200_000n, claimed: 200_000n })

      const reconciliation = yield* ChannelReconciliation
      const [check] = yield* reconciliation.check
      expect(check).toMatchObject({
        network: chain.network,
        ledgerReceivable: 700_000n,
        rowsReceivable: 700_000n,
        receivableDrift: 0n,
        chainPending: 300_000n,
        rowsPending: 500_000n,
        pendingDrift: 0n
      })
      expect(check?.channels).toMatchObject({ checked: 2, drifted: [], claimsInFlight: 200_000n, balanceDrift: 0n, claimedDrift: 0n })

      // The claim lands: nothing in flight, still no drift.
      yield* Effect.promise(() => channels.claim(b.config, 200_000n, 200_000n))
      const [landed] = yield* reconciliation.check
      expect(landed).toMatchObject({ chainPending: 500_000n, rowsPending: 500_000n, pendingDrift: 0n })
      expect(landed?.channels.claimsInFlight).toBe(0n)

      // A pass without drift stores an unconfirmed check; the gauges say 0, /health is not degraded by channels.
      yield* reconciliation.pass
      const [stored] = yield* reconciliation.status
      expect(stored).toMatchObject({ confirmed: false, receivableDrift: 0n, channelsDrifted: 0, pendingDrift: 0n, channelsChecked: 2 })
      const metrics = yield* Effect.promise(() => fetch(`${baseUrl}/metrics`).then((r) => r.text()))
      expect(metric(metrics, `marketplace_channel_drift_micro_usdc{check="claimed"}`)).toBe("0")
      expect(metric(metrics, `marketplace_channel_drift_micro_usdc{check="pending"}`)).toBe("0")
      const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(health.body.data).toMatchObject({ channels: { atRisk: 0, reconciliation: [{ network: chain.network, confirmed: false, channelsDrifted: 0 }] } })
    }), { timeout: 60_000 })

  it.scoped("a chain whose totalClaimed is ahead of our row, and a receivable no row explains, are drift: confirmed, logged as gauges, /health and the operator report", () =>
    Effect.gen(function* () {
      const { sql, chain, baseUrl } = yield* TestEnv
      const channels = channelsTo({ treasury: chain.treasury, payer: devAccount(6), authorizer: devAccount(7), relayer: devAccount(8) })
      // C: our row says nothing is claimed; on chain 0.1 was claimed (a claim we have no record of).
      const c = yield* Effect.promise(() => channels.open("recon c", 300_000n))
      yield* Effect.promise(() => channels.claim(c.config, 100_000n, 100_000n))
      yield* insertChannel(sql, { id: c.id, network: chain.network, config: c.config, status: "open", balance: 300_000n, charged: 100_000n, claimed: 0n })
      // And the ledger books 0.05 into the receivable without any charge.
      yield* sql.withTransaction(postReceivable(yield* Ledger, 50_000n))

      const reconciliation = yield* ChannelReconciliation
      const [check] = yield* reconciliation.check
      expect(check).toMatchObject({ receivableDrift: 50_000n, pendingDrift: 100_000n })
      expect(check?.channels).toMatchObject({ claimedDrift: 100_000n, balanceDrift: 0n })
      expect(check?.channels.drifted).toEqual([{ channelId: c.id, balance: 300_000n, chainBalance: 300_000n, claimedCumulative: 0n, chainTotalClaimed: 100_000n }])

      const logs = yield* recordingLogs
      yield* passWithSecondLook
      expect(logs.find("channels.drift", { network: chain.network, channelsDrifted: 1 })).toHaveLength(1)
      const [stored] = yield* reconciliation.status
      expect(stored).toMatchObject({ confirmed: true, receivableDrift: 50_000n, claimedDrift: 100_000n, pendingDrift: 100_000n, channelsDrifted: 1 })

      const metrics = yield* Effect.promise(() => fetch(`${baseUrl}/metrics`).then((r) => r.text()))
      expect(metric(metrics, `marketplace_channel_drift_micro_usdc{check="claimed"}`)).toBe("100000")
      expect(metric(metrics, `marketplace_channel_drift_micro_usdc{check="receivable"}`)).toBe("50000")
      expect(metric(metrics, `marketplace_channel_drift_micro_usdc{check="pending"}`)).toBe("100000")
      const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(health.body.data).toMatchObject({ status: "degraded", channels: { reconciliation: [{ confirmed: true, channelsDrifted: 1, receivableDrift: "50000", pendingDrift: "100000" }] } })

      const report = yield* Effect.promise(() => call(`${baseUrl}/api/v1/operator/treasury/reconciliation`, { headers: operator }))
      expect(report.status).toBe(200)
      expect(report.body.data).toMatchObject({
        channels: {
          current: [{ network: chain.network, receivableDrift: "50000", claimedDrift: "100000", pendingDrift: "100000", drifted: [{ channelId: c.id, chainTotalClaimed: "100000", claimedCumulative: "0" }] }],
          lastChecks: [{ network: chain.network, confirmed: true, channelsDrifted: 1 }]
        }
      })

      // Repaired (the claim recorded, the stray posting reversed): the next pass finds nothing, the gauges go back to 0.
      yield* sql`UPDATE channels SET claimed_cumulative = 100000 WHERE id = ${c.id}`
      yield* sql`UPDATE channel_charges SET status = 'claimed' WHERE channel_id = ${c.id}`
      yield* sql.withTransaction(postReceivable(yield* Ledger, -50_000n))
      yield* reconciliation.pass
      const [after] = yield* reconciliation.status
      expect(after).toMatchObject({ confirmed: false, receivableDrift: 0n, channelsDrifted: 0, pendingDrift: 0n })
      const calm = yield* Effect.promise(() => fetch(`${baseUrl}/metrics`).then((r) => r.text()))
      expect(metric(calm, `marketplace_channel_drift_micro_usdc{check="claimed"}`)).toBe("0")
      expect(metric(calm, `marketplace_channel_drift_micro_usdc{check="receivable"}`)).toBe("0")
    }), { timeout: 90_000 })
})
