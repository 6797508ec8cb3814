// Handler of GET /health: a live check of the database and the chain on every call.
import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { Chain } from "../../layers/Chain.js"
import { DatabaseInfo } from "../../layers/Pg.js"
import { Unavailable } from "../domain/Errors.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const HealthHttpLive = HttpApiBuilder.group(Api, "health", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const database = yield* DatabaseInfo
    const startedAt = yield* Clock.currentTimeMillis
    const down = (what: string) => () =>
      new Unavailable({ code: "SERVICE_UNAVAILABLE", message: `${what} is not reachable`, details: { component: what } })
    return handlers.handle("health", () =>
      Effect.gen(function* () {
        yield* sql`SELECT 1`.pipe(Effect.mapError(down("database")))
        const blockNumber = yield* Effect.tryPromise({ try: () => chain.publicClient.getBlockNumber({ cacheTime: 0 }), catch: down("chain") })
        const now = yield* Clock.currentTimeMillis
        return respond({
          status: "ok" as const,
          mode: chain.mode,
          database: database.mode,
          chain: {
            chainId: chain.chainId,
            network: chain.network,
            blockNumber: blockNumber.toString(),
            usdc: chain.usdc.address,
            treasury: chain.treasury
          },
          settlement: Option.isSome(chain.signer) ? ("local" as const) : ("facilitator" as const),
          uptimeSeconds: Math.floor((now - startedAt) / 1000)
        })
      }))
  }))
