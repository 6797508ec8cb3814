// Paying through a batch-settlement channel from a test: a channels repository on its own connection pool (what one
// process of the service holds) and a client that signs vouchers and follows the corrective state until answered.
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, String as Str } from "effect"
import { type ChargeOutcome, makeChannelsRepo } from "../../services/channels/Repo.js"

export const processRepo = (url: string) =>
  Effect.gen(function* () {
    const pool = PgClient.layer({
      url: Redacted.make(url),
      maxConnections: 8,
      transformQueryNames: Str.camelToSnake,
      transformResultNames: Str.snakeToCamel,
      transformJson: false
    })
    const context = yield* Layer.build(pool)
    return yield* Effect.provide(makeChannelsRepo, context)
  })

export type Repo = Effect.Effect.Success<ReturnType<typeof processRepo>>

/** A voucher over `maxClaimable` (its signature is checked before the charge, not by it). */
export const voucher = (maxClaimable: bigint) => ({ maxClaimable, signature: `0x${maxClaimable.toString(16).padStart(130, "0")}` })

/**
 * A paying client: signs a voucher over what it believes is charged plus the price; on a stale answer it takes the
 * corrective state (the 402's chargedCumulative) and signs again. Ends on the first answer that is not stale.
 */
export const payUntilAnswered = (repo: Repo, channelId: string, requestId: string, amount: bigint) =>
  Effect.gen(function* () {
    let expected = 0n
    for (let attempt = 0; attempt < 2_000; attempt++) {
      const answer: ChargeOutcome = yield* repo.charge({ channelId, requestId, amount, voucher: voucher(expected + amount), expectedCumulative: expected })
      if (answer.outcome !== "stale") return { answer, attempts: attempt + 1 }
      expected = answer.chargedCumulative ?? 0n
    }
    return yield* Effect.dieMessage(`${requestId} never got past a stale answer`)
  })
