// Pure: a channel reconciliation (checked now, or stored by the worker) as the operator API shows it, micro-USDC strings.
import { Option, Schema } from "effect"
import type { ChannelReconciliationResult, StoredCheck } from "./ChannelReconciliation.js"

const Drifted = Schema.Array(Schema.Struct({
  channelId: Schema.String,
  balance: Schema.String,
  chainBalance: Schema.String,
  claimedCumulative: Schema.String,
  chainTotalClaimed: Schema.String
}))

export const currentView = (r: ChannelReconciliationResult, checkedAt: Date) => ({
  network: r.network,
  block: r.block.toString(),
  ledgerReceivable: r.ledgerReceivable.toString(),
  rowsReceivable: r.rowsReceivable.toString(),
  receivableDrift: r.receivableDrift.toString(),
  channelsChecked: r.channels.checked,
  channelsDrifted: r.channels.drifted.length,
  balanceDrift: r.channels.balanceDrift.toString(),
  claimedDrift: r.channels.claimedDrift.toString(),
  claimsInFlight: r.channels.claimsInFlight.toString(),
  chainPending: r.chainPending.toString(),
  rowsPending: r.rowsPending.toString(),
  pendingDrift: r.pendingDrift.toString(),
  drifted: r.channels.drifted.map((d) => ({
    channelId: d.channelId,
    balance: d.balance.toString(),
    chainBalance: d.chainBalance.toString(),
    claimedCumulative: d.claimedCumulative.toString(),
    chainTotalClaimed: d.chainTotalClaimed.toString()
  })),
  checkedAt: checkedAt.toISOString()
})

export const storedView = (s: StoredCheck) => ({
  network: s.network,
  block: s.blockNumber.toString(),
  ledgerReceivable: s.ledgerReceivable.toString(),
  rowsReceivable: s.rowsReceivable.toString(),
  receivableDrift: s.receivableDrift.toString(),
  channelsChecked: s.channelsChecked,
  channelsDrifted: s.channelsDrifted,
  balanceDrift: s.balanceDrift.toString(),
  claimedDrift: s.claimedDrift.toString(),
  claimsInFlight: s.claimsInFlight.toString(),
  chainPending: s.chainPending.toString(),
  rowsPending: s.rowsPending.toString(),
  pendingDrift: s.pendingDrift.toString(),
  drifted: Option.getOrElse(Schema.decodeUnknownOption(Drifted)(s.drifted), () => []),
  confirmed: s.confirmed,
  checkedAt: s.checkedAt.toISOString()
})
