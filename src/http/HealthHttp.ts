// Handler of GET /health: a live check of the database and the chain on every call.
import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { Chain } from "../../layers/Chain.js"
import { makeChainProbe } from "../../layers/chainProbe.js"
import { DatabaseInfo } from "../../layers/Pg.js"
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
    const startedAt = yield* Clock.currentTimeMillis
    const probeChain = yield* makeChainProbe(chain)
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
        return respond({
          status: drifted || gasLow || probe._tag === "Degraded" ? ("degraded" as const) : ("ok" as const),
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
          uptimeSeconds: Math.floor((now - startedAt) / 1000)
        })
      }))
  }))
