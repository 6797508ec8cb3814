// Channels at risk, from the rows: a channel `withdrawing` with charges not claimed yet (lost unless a claim lands before
// the payer can finalize) and a channel in `claimFailed`. The same facts as the needs-attention kinds channel_withdrawing
// and channel_claim_failed (services/operator/attentionQueries.ts), summed for /health and the /metrics gauges.
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { ChannelStatus } from "./Repo.js"

export const ChannelSummary = Schema.Struct({
  /** False when no channel was ever opened with us (then /health leaves channels out). */
  any: Schema.Boolean,
  byStatus: Schema.Array(Schema.Struct({ status: ChannelStatus, n: Schema.Number })),
  /** Σ(charged − claimed) over channels still open, withdrawing or in claimFailed. */
  unclaimed: Schema.BigInt,
  withdrawingUnclaimed: Schema.Number,
  claimFailed: Schema.Number,
  /** Money at stake in those: withdrawing, charged − claimed; claimFailed, charged − settled. */
  atRiskAmount: Schema.BigInt
})
export type ChannelSummary = typeof ChannelSummary.Type

/**
 * One statement over the live channels (open, withdrawing, claimFailed: the partial index `channels_to_claim`).
 * `allStatuses` also counts every other state (a scan of the table: for the cached gauges, not for each /health probe).
 */
export const channelSummary = (sql: SqlClient.SqlClient, options: { readonly allStatuses: boolean }) =>
  Effect.gen(function* () {
    const counted = options.allStatuses ? sql`channels` : sql`live`
    const [row] = yield* sql`
      WITH live AS (SELECT status, charged_cumulative AS charged, claimed_cumulative AS claimed, settled_cumulative AS settled
                    FROM channels WHERE status IN ('open', 'withdrawing', 'claimFailed'))
      SELECT EXISTS (SELECT 1 FROM channels) AS any,
        coalesce((SELECT json_agg(json_build_object('status', status, 'n', n)) FROM (SELECT status, count(*)::int AS n FROM ${counted} GROUP BY status) s), '[]') AS by_status,
        (SELECT coalesce(sum(charged - claimed), 0) FROM live)::text AS unclaimed,
        (SELECT count(*) FROM live WHERE status = 'withdrawing' AND charged > claimed)::int AS withdrawing_unclaimed,
        (SELECT count(*) FROM live WHERE status = 'claimFailed')::int AS claim_failed,
        (SELECT coalesce(sum(CASE WHEN status = 'claimFailed' THEN charged - settled ELSE charged - claimed END), 0) FROM live
          WHERE status = 'claimFailed' OR (status = 'withdrawing' AND charged > claimed))::text AS at_risk_amount`
    return yield* Schema.decodeUnknown(ChannelSummary)(row)
  })

export const atRiskCount = (s: ChannelSummary) => s.withdrawingUnclaimed + s.claimFailed
