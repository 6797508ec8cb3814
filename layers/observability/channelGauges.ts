// The cluster-wide gauges of batch-settlement channels (exported with the other database gauges by the holder of their
// lease, layers/observability/dbGauges.ts): channels by status, what is charged and not claimed, the channels at risk
// (services/channels/AtRisk.ts) and the channel reconciliation's confirmed drift.
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Gauge, type Registry } from "prom-client"
import { channelSummary, type ChannelSummary } from "../../services/channels/AtRisk.js"
import { ChannelStatus } from "../../services/channels/Repo.js"

export interface ChannelReading {
  readonly summary: ChannelSummary
  /** Newest check per network, confirmed ones only: receivable (one account: the largest), the rest summed. */
  readonly drift: { readonly receivable: bigint; readonly balance: bigint; readonly claimed: bigint; readonly pending: bigint }
}

export const readChannels = (sql: SqlClient.SqlClient) =>
  Effect.all({
    summary: channelSummary(sql, { allStatuses: true }),
    drift: sql<{ receivable: string; balance: string; claimed: string; pending: string }>`
      WITH newest AS (SELECT * FROM (SELECT DISTINCT ON (network) * FROM channel_reconciliations ORDER BY network, id DESC) t WHERE confirmed)
      SELECT coalesce((SELECT receivable_drift FROM newest ORDER BY abs(receivable_drift) DESC LIMIT 1), 0)::text AS receivable,
             coalesce(sum(balance_drift), 0)::text AS balance, coalesce(sum(claimed_drift), 0)::text AS claimed,
             coalesce(sum(pending_drift), 0)::text AS pending
      FROM newest`.pipe(
      Effect.map((r) => ({
        receivable: BigInt(r[0]?.receivable ?? "0"),
        balance: BigInt(r[0]?.balance ?? "0"),
        claimed: BigInt(r[0]?.claimed ?? "0"),
        pending: BigInt(r[0]?.pending ?? "0")
      }))
    )
  }, { concurrency: 2 })

export const makeChannelGauges = (registry: Registry) => {
  const gauge = <L extends string>(name: string, help: string, labelNames: ReadonlyArray<L> = []) =>
    new Gauge<L>({ name, help, labelNames, registers: [registry] })
  const byStatus = gauge("marketplace_channels", "Batch-settlement channels with our treasury as receiver, by status", ["status"])
  const unclaimed = gauge("marketplace_channel_unclaimed_micro_usdc", "Charged against channels still open, withdrawing or in claimFailed and not claimed yet (micro-USDC)")
  const atRisk = gauge("marketplace_channels_at_risk", "Channels at risk: withdrawing with charges not claimed, or a claim failed", ["reason"])
  const atRiskAmount = gauge("marketplace_channel_at_risk_micro_usdc", "Money at stake in the channels at risk (withdrawing: charged − claimed; claim failed: charged − settled), micro-USDC")
  const drift = gauge(
    "marketplace_channel_drift_micro_usdc",
    "The channel reconciliation's confirmed drift (micro-USDC, 0 when all agree): receivable ledger − rows; balance and claimed chain − rows; pending claimed-unsettled chain − rows",
    ["check"]
  )
  const apply = (r: ChannelReading) => {
    const counts = new Map(r.summary.byStatus.map((b) => [b.status, b.n]))
    for (const status of ChannelStatus.literals) byStatus.set({ status }, counts.get(status) ?? 0)
    unclaimed.set(Number(r.summary.unclaimed))
    atRisk.set({ reason: "withdrawing" }, r.summary.withdrawingUnclaimed)
    atRisk.set({ reason: "claim_failed" }, r.summary.claimFailed)
    atRiskAmount.set(Number(r.summary.atRiskAmount))
    drift.set({ check: "receivable" }, Number(r.drift.receivable))
    drift.set({ check: "balance" }, Number(r.drift.balance))
    drift.set({ check: "claimed" }, Number(r.drift.claimed))
    drift.set({ check: "pending" }, Number(r.drift.pending))
  }
  return { apply } as const
}
