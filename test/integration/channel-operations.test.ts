// Channels for operators: a channel withdrawing with charges not claimed and a channel whose claim failed are at risk,
// on /health (degraded), in the needs-attention report and the console's first page, and in the /metrics gauges; the
// operator API lists channels (by status, by payer, keyset pages) and shows one with its charges and the contract's
// state, behind the operator token, in the spec's envelope.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { channelsTo, insertChannel } from "../support/channelFixtures.js"
import { call, devAccount } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"

const operator = { authorization: `Bearer ${OPERATOR_TOKEN}` }
const metric = (text: string, line: string) => text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1]
const randomId = () => `0x${randomBytes(32).toString("hex")}`
const run = randomBytes(4).toString("hex")

layer(TestApp({ BACKGROUND_WORKERS: "false", METRICS_DB_CACHE_MS: "0" }))("channels for operators", (it) => {
  it.effect("channels at risk show on /health, in needs attention (API and console) and in the gauges", () =>
    Effect.gen(function* () {
      const { sql, chain, baseUrl } = yield* TestEnv
      const channels = channelsTo({ treasury: chain.treasury, payer: devAccount(6), authorizer: devAccount(7), relayer: devAccount(8) })
      const config = channels.configFor(`at risk ${run}`)
      const calm = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(calm.body.data?.["channels"]).toBeUndefined()

      // Open and healthy; withdrawing with 0.25 charged and not claimed; a claim failed with 0.4 charged, 0.1 settled.
      yield* insertChannel(sql, { id: randomId(), network: chain.network, config, status: "open", balance: 1_000_000n, charged: 300_000n, claimed: 100_000n })
      const withdrawing = randomId()
      yield* insertChannel(sql, {
        id: withdrawing, network: chain.network, config, status: "withdrawing", balance: 1_000_000n, charged: 350_000n, claimed: 100_000n,
        context: { withdrawRequestedAt: Date.parse("2026-12-01T10:00:00Z"), finalizableAt: Date.parse("2026-12-01T10:15:00Z") }
      })
      const failed = randomId()
      yield* insertChannel(sql, {
        id: failed, network: chain.network, config, status: "claimFailed", balance: 500_000n, charged: 400_000n, claimed: 400_000n, settled: 100_000n, claimedOnChain: 100_000n,
        context: { lastError: "ClaimExceedsBalance" }
      })
      // Withdrawing with everything claimed is not at risk.
      yield* insertChannel(sql, { id: randomId(), network: chain.network, config, status: "withdrawing", balance: 200_000n, charged: 50_000n, claimed: 50_000n })

      const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(health.status).toBe(200)
      expect(health.body.data).toMatchObject({
        status: "degraded",
        channels: { atRisk: 2, withdrawingUnclaimed: 1, claimFailed: 1, atRiskAmount: String(250_000 + 300_000), unclaimed: String(200_000 + 250_000) }
      })

      const report = yield* Effect.promise(() => call(`${baseUrl}/api/v1/operator/attention`, { headers: operator }))
      expect(report.status).toBe(200)
      const data = report.body.data as { counts: Record<string, number>; items: ReadonlyArray<Record<string, unknown>> }
      expect(data.counts).toMatchObject({ channel_withdrawing: 1, channel_claim_failed: 1 })
      const items = data.items.filter((i) => String(i["kind"]).startsWith("channel_"))
      expect(items).toHaveLength(2)
      expect(items[0]).toMatchObject({ kind: "channel_claim_failed", actorId: failed, amount: "0.300000", agentId: null, lever: null })
      expect(String(items[0]?.["cause"])).toContain("failed: ClaimExceedsBalance")
      expect(items[1]).toMatchObject({ kind: "channel_withdrawing", actorId: withdrawing, amount: "0.250000" })
      expect(String(items[1]?.["cause"])).toContain("it can finalize at 2026-12-01 10:15:00 UTC; charges are not claimed on chain yet")

      // The console's first page lists them with their cause.
      const login = yield* Effect.promise(() =>
        fetch(`${baseUrl}/ops/login`, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `token=${OPERATOR_TOKEN}` }))
      const cookie = login.headers.get("set-cookie")?.split(";")[0]
      expect(cookie).toBeDefined()
      const page = yield* Effect.promise(() => fetch(`${baseUrl}/ops`, { headers: { cookie: cookie ?? "" } }).then((r) => r.text()))
      expect(page).toContain(`data-kind="channel_withdrawing" data-actor="${withdrawing}"`)
      expect(page).toContain(`data-kind="channel_claim_failed" data-actor="${failed}"`)
      expect(page).toContain("Channel claim failed")

      const metrics = yield* Effect.promise(() => fetch(`${baseUrl}/metrics`).then((r) => r.text()))
      expect(metric(metrics, `marketplace_channels{status="withdrawing"}`)).toBe("2")
      expect(metric(metrics, `marketplace_channels{status="claimFailed"}`)).toBe("1")
      expect(metric(metrics, `marketplace_channels{status="closed"}`)).toBe("0")
      expect(metric(metrics, `marketplace_channels_at_risk{reason="withdrawing"}`)).toBe("1")
      expect(metric(metrics, `marketplace_channels_at_risk{reason="claim_failed"}`)).toBe("1")
      expect(metric(metrics, "marketplace_channel_unclaimed_micro_usdc")).toBe("450000")
      expect(metric(metrics, "marketplace_channel_at_risk_micro_usdc")).toBe("550000")
      expect(metric(metrics, `marketplace_attention{kind="channel_withdrawing"}`)).toBe("1")
      expect(metric(metrics, `marketplace_attention{kind="channel_claim_failed"}`)).toBe("1")

      // The claim lands and the withdrawal's charges are claimed: nothing at risk any more.
      yield* sql`UPDATE channels SET status = 'open' WHERE id = ${failed}`
      yield* sql`UPDATE channels SET claimed_cumulative = charged_cumulative WHERE id = ${withdrawing}`
      const after = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(after.body.data).toMatchObject({ status: "ok", channels: { atRisk: 0 } })
    }), { timeout: 60_000 })

  it.effect("the operator lists channels by status and payer in keyset pages and shows one with its charges and the contract's state", () =>
    Effect.gen(function* () {
      const { sql, chain, baseUrl } = yield* TestEnv
      const api = (path: string, headers: Record<string, string> = operator) => Effect.promise(() => call(`${baseUrl}/api/v1/operator/channels${path}`, { headers }))
      const payer = devAccount(5)
      const channels = channelsTo({ treasury: chain.treasury, payer, authorizer: devAccount(7), relayer: devAccount(8) })
      const opened = yield* Effect.promise(() => channels.open(`operator ${run}`, 800_000n))
      yield* Effect.promise(() => channels.claim(opened.config, 300_000n, 200_000n))
      yield* Effect.promise(() => channels.initiateWithdraw(opened.config, 100_000n))
      yield* insertChannel(sql, { id: opened.id, network: chain.network, config: opened.config, status: "withdrawing", balance: 800_000n, charged: 300_000n, claimed: 200_000n, createdAt: new Date(Date.now() + 60_000) })

      expect((yield* api("", {})).body.error?.code).toBe("OPERATOR_AUTH_REQUIRED")
      const all = yield* api("")
      expect(all.status).toBe(200)
      const listed = all.body.data as { items: ReadonlyArray<Record<string, unknown>>; pagination: { hasMore: boolean; nextCursor: string | null } }
      expect(listed.items).toHaveLength(5)
      expect(listed.items[0]).toMatchObject({ id: opened.id, status: "withdrawing", payer: payer.address.toLowerCase(), balance: "800000", unclaimed: "100000", chargedCumulative: "300000" })

      const byPayer = yield* api(`?payer=${payer.address}`)
      expect((byPayer.body.data as typeof listed).items.map((i) => i["id"])).toEqual([opened.id])
      const withdrawing = yield* api("?status=withdrawing")
      expect((withdrawing.body.data as typeof listed).items).toHaveLength(3)
      const first = (yield* api("?status=withdrawing&limit=2")).body.data as typeof listed
      expect(first.pagination.hasMore).toBe(true)
      const second = (yield* api(`?status=withdrawing&limit=2&cursor=${first.pagination.nextCursor}`)).body.data as typeof listed
      expect(second.items).toHaveLength(1)
      expect(new Set([...first.items, ...second.items].map((i) => i["id"])).size).toBe(3)

      const bad = yield* api("?status=lost")
      expect(bad.status).toBe(400)
      expect(bad.body.error?.code).toBe("VALIDATION_ERROR")
      expect((yield* api("/0x1234")).status).toBe(400)
      const missing = yield* api(`/${randomId()}`)
      expect(missing.status).toBe(404)
      expect(missing.body.error?.code).toBe("CHANNEL_NOT_FOUND")

      const detail = yield* api(`/${opened.id.toUpperCase().replace("0X", "0x")}`)
      expect(detail.status).toBe(200)
      expect(detail.body.data).toMatchObject({
        channel: { id: opened.id, status: "withdrawing", claimedCumulative: "200000" },
        charges: { counts: { charged: 1, returned: 0, claimed: 1 } },
        onChain: { balance: "800000", totalClaimed: "200000", refundNonce: "0", pendingWithdrawal: { amount: "100000" } },
        onChainError: null
      })
      const charges = (detail.body.data as { charges: { latest: ReadonlyArray<Record<string, unknown>> } }).charges.latest
      expect(charges.map((c) => c["status"])).toEqual(["charged", "claimed"])
    }), { timeout: 60_000 })
})
