// The channel worker, in the one instance of the cluster holding its lease (layers/cluster/Leases.ts): every tick the
// withdrawal watch, then a claim of what is due now (a take that has not landed, a channel at the claim threshold or
// whose payer started a withdrawal) and a settle; every CHANNEL_CLAIM_INTERVAL_SECONDS the claim takes every channel
// with anything unclaimed.
import { Clock, Duration, Effect, Layer, Ref, Schedule } from "effect"
import { Leases } from "../../layers/cluster/Leases.js"
import { ChannelClaims } from "./Claims.js"
import { ChannelTerms } from "./Terms.js"
import { WithdrawWatch } from "./WithdrawWatch.js"

export const CHANNEL_CLAIMS_LEASE = "channels.claims"
/** How soon a channel at the threshold, or whose payer started a withdrawal, is claimed. */
export const CHANNEL_TICK = Duration.seconds(1)

export const makeChannelTick = Effect.gen(function* () {
  const terms = yield* ChannelTerms
  const claims = yield* ChannelClaims
  const watch = yield* WithdrawWatch
  const lastScheduled = yield* Ref.make(0)
  return Effect.gen(function* () {
    for (const t of terms.all) {
      yield* watch.pass(t).pipe(Effect.catchAll((e) => Effect.logWarning(`withdrawal watch on ${t.network}: ${e.message}; read again at the next tick`)))
    }
    const now = yield* Clock.currentTimeMillis
    const scheduled = now - (yield* Ref.get(lastScheduled)) >= terms.claimIntervalSeconds * 1_000
    if (scheduled) yield* Ref.set(lastScheduled, now)
    return yield* claims.pass(scheduled)
  }).pipe(Effect.withSpan("ChannelClaims.tick"))
})

export const ChannelClaimsWorkerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const tick = yield* makeChannelTick
    const leases = yield* Leases
    yield* leases.whileHolding(
      CHANNEL_CLAIMS_LEASE,
      tick.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("channel claims tick failed", cause)),
        Effect.repeat(Schedule.spaced(CHANNEL_TICK)),
        Effect.asVoid
      )
    )
  })
)
