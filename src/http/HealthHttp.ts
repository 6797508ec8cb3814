// Handler of GET /health: a live check of the database and the chain on every call.
import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { Chain } from "../../layers/Chain.js"
import { makeChainProbe } from "../../layers/chainProbe.js"
import { Networks } from "../../layers/Networks.js"
import { caip2Of } from "../../layers/x402/v2.js"
import { DatabaseInfo } from "../../layers/Pg.js"
import { atRiskCount, channelSummary } from "../../services/channels/AtRisk.js"
import { ChannelReconciliation, confirmedDrift } from "../../services/treasury/ChannelReconciliation.js"
import { GasWatch } from "../../services/treasury/GasWatch.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { Unavailable } from "../domain/Errors.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const HealthHttpLive = HttpApiBuilder.group(Api, "health", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const database = yield* DatabaseInfo
    const reconciliation = yield* Reconciliation
    const gasWatch = yield* GasWatch
    const channelChecks = yield* ChannelReconciliation
    const startedAt = yield* Clock.currentTimeMillis
    const probeChain = yield* makeChainProbe(chain)
    const networks = yield* Networks
    const others = yield* Effect.forEach(networks.all.slice(1), (c) => Effect.map(makeChainProbe(c), (probe) => ({ chain: c, probe })))
    const lastCheck = (status: typeof reconciliation.status) =>
      status.pipe(Effect.disconnect, Effect.timeout("500 millis"), Effect.catchAllCause(() => Effect.succeed(Option.none())))
    const gasOf = (g: Effect.Effect.Success<typeof gasWatch.status>) =>
      Option.match(g, {
        onNone: () => ({}),
        onSome: (x) => ({ gas: { balanceWei: x.balanceWei.toString(), transactionsLeft: x.transactionsLeft.toString(), low: x.low, checkedAt: new Date(x.checkedAt).toISOString() } })
      })
    const treasuryOf = (last: Effect.Effect.Success<typeof reconciliation.status>) =>
      Option.match(last, {
        onNone: () => ({}),
        onSome: (l) => ({ treasury: { drift: l.drift.toString(), block: l.blockNumber.toString(), checkedAt: l.checkedAt.toISOString(), confirmed: l.confirmed } })
      })
    /** Channels at risk and their reconciliation: bounded like the treasury's status, left out when they do not answer. */
    const channelsNow = Effect.all([channelSummary(sql, { allStatuses: false }), channelChecks.status]).pipe(
      Effect.disconnect,
      Effect.timeout("500 millis"),
      Effect.map(([summary, checks]) =>
        summary.any
          ? Option.some({
            bad: atRiskCount(summary) > 0 || checks.some(confirmedDrift),
            view: {
              channels: {
                byStatus: summary.byStatus.map((b) => ({ status: b.status, count: b.n })),
                unclaimed: summary.unclaimed.toString(),
                atRisk: atRiskCount(summary),
                withdrawingUnclaimed: summary.withdrawingUnclaimed,
                claimFailed: summary.claimFailed,
                atRiskAmount: summary.atRiskAmount.toString(),
                reconciliation: checks.map((c) => ({
                  network: c.network,
                  block: c.blockNumber.toString(),
                  receivableDrift: c.receivableDrift.toString(),
                  channelsDrifted: c.channelsDrifted,
                  pendingDrift: c.pendingDrift.toString(),
                  claimsInFlight: c.claimsInFlight.toString(),
                  confirmed: c.confirmed,
                  checkedAt: c.checkedAt.toISOString()
                }))
              }
            }
          })
          : Option.none()
      ),
      Effect.catchAllCause(() => Effect.succeed(Option.none()))
    )
    const down = (what: string) => () =>
      new Unavailable({ code: "SERVICE_UNAVAILABLE", message: `${what} is not reachable`, details: { component: what } })
    return handlers.handle("health", () =>
      Effect.gen(function* () {
        // Bounded: a paused or unreachable database answers 503 within about a second and a half, never hangs.
        // disconnect: the timeout answers at once instead of waiting for the interrupted query's cancel request.
        yield* sql`SELECT 1`.pipe(Effect.disconnect, Effect.timeoutFail({ duration: "1500 millis", onTimeout: down("database") }), Effect.mapError(down("database")))
        // A chain that answers badly (errors, 429, a stale head) degrades; only one that does not answer is a 503:
        // restarting a process does not fix a flaky provider.
        const probe = yield* probeChain
        if (probe._tag === "Down") return yield* down("chain")()
        const blockNumber = probe.blockNumber
        const now = yield* Clock.currentTimeMillis
        const last = yield* reconciliation.status.pipe(Effect.disconnect, Effect.timeout("500 millis"), Effect.catchAllCause(() => Effect.succeed(Option.none())))
        const drifted = Option.isSome(last) && last.value.confirmed && last.value.drift !== 0n
        const gas = yield* gasWatch.status
        const gasLow = Option.isSome(gas) && gas.value.low
        // The other networks, side by side: each its own probe and its own reconciliation.
        const second = yield* Effect.forEach(others, ({ chain: c, probe: probeOther }) =>
          Effect.gen(function* () {
            const p = yield* probeOther
            const l = yield* lastCheck(reconciliation.on(c.network).status)
            const g = yield* gasWatch.statusOf(c.network)
            const bad = p._tag !== "Ok" || (Option.isSome(l) && l.value.confirmed && l.value.drift !== 0n) || (Option.isSome(g) && g.value.low)
            return {
              bad,
              view: {
                network: c.network,
                caip2: caip2Of(c.chainId),
                chainId: c.chainId,
                ...(p._tag === "Down" || p.blockNumber === undefined ? {} : { blockNumber: p.blockNumber.toString() }),
                usdc: c.usdc.address,
                confirmations: c.confirmations,
                ...(p._tag === "Degraded" ? { problem: { kind: p.kind, message: p.message } } : {}),
                ...(p._tag === "Down" ? { problem: { kind: "down" as const, message: "the network's RPC does not answer" } } : {}),
                ...treasuryOf(l),
                ...gasOf(g)
              }
            }
          }), { concurrency: "unbounded" })
        const channels = yield* channelsNow
        const channelsBad = Option.isSome(channels) && channels.value.bad
        return respond({
          status: drifted || gasLow || channelsBad || probe._tag === "Degraded" || second.some((n) => n.bad) ? ("degraded" as const) : ("ok" as const),
          mode: chain.mode,
          database: database.mode,
          chain: {
            chainId: chain.chainId,
            network: chain.network,
            ...(blockNumber === undefined ? {} : { blockNumber: blockNumber.toString() }),
            usdc: chain.usdc.address,
            treasury: chain.treasury,
            confirmations: chain.confirmations,
            ...(probe._tag === "Degraded" ? { problem: { kind: probe.kind, message: probe.message } } : {})
          },
          networks: [
            {
              network: chain.network,
              caip2: caip2Of(chain.chainId),
              chainId: chain.chainId,
              ...(blockNumber === undefined ? {} : { blockNumber: blockNumber.toString() }),
              usdc: chain.usdc.address,
              confirmations: chain.confirmations,
              ...(probe._tag === "Degraded" ? { problem: { kind: probe.kind, message: probe.message } } : {}),
              ...treasuryOf(last),
              ...gasOf(gas)
            },
            ...second.map((n) => n.view)
          ],
          settlement: chain.settlement,
          ...Option.match(last, {
            onNone: () => ({}),
            onSome: (l) => ({
              treasury: { drift: l.drift.toString(), block: l.blockNumber.toString(), checkedAt: l.checkedAt.toISOString(), confirmed: l.confirmed }
            })
          }),
          ...Option.match(gas, {
            onNone: () => ({}),
            onSome: (g) => ({
              gas: { balanceWei: g.balanceWei.toString(), transactionsLeft: g.transactionsLeft.toString(), low: g.low, checkedAt: new Date(g.checkedAt).toISOString() }
            })
          }),
          ...Option.match(channels, { onNone: () => ({}), onSome: (c) => c.view }),
          uptimeSeconds: Math.floor((now - startedAt) / 1000)
        })
      }))
  }))
