// Handler of GET /health: a live check of the database and the chain on every call.
import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { Chain } from "../../layers/Chain.js"
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
    const down = (what: string) => () =>
      new Unavailable({ code: "SERVICE_UNAVAILABLE", message: `${what} is not reachable`, details: { component: what } })
    return handlers.handle("health", () =>
      Effect.gen(function* () {
        // Bounded: a paused or unreachable database answers 503 within about a second and a half, never hangs.
        // disconnect: the timeout answers at once instead of waiting for the interrupted query's cancel request.
        yield* sql`SELECT 1`.pipe(Effect.disconnect, Effect.timeoutFail({ duration: "1500 millis", onTimeout: down("database") }), Effect.mapError(down("database")))
        const blockNumber = yield* Effect.tryPromise({ try: () => chain.publicClient.getBlockNumber({ cacheTime: 0 }), catch: down("chain") }).pipe(
          Effect.disconnect,
          Effect.timeoutFail({ duration: "1500 millis", onTimeout: down("chain") })
        )
        const now = yield* Clock.currentTimeMillis
        const last = yield* reconciliation.status.pipe(Effect.disconnect, Effect.timeout("500 millis"), Effect.catchAllCause(() => Effect.succeed(Option.none())))
        const drifted = Option.isSome(last) && last.value.confirmed && last.value.drift !== 0n
        const gas = yield* gasWatch.status
        const gasLow = Option.isSome(gas) && gas.value.low
        return respond({
          status: drifted || gasLow ? ("degraded" as const) : ("ok" as const),
          mode: chain.mode,
          database: database.mode,
          chain: {
            chainId: chain.chainId,
            network: chain.network,
            blockNumber: blockNumber.toString(),
            usdc: chain.usdc.address,
            treasury: chain.treasury
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
