// Pure: batch-settlement channel rows against what the contract says at one block (docs/operators.md "Reconciling
// channels"). A row's claimed cumulative is set when a claim is built, before it is sent: a row ahead of the chain's
// totalClaimed is a claim in flight, not drift. Everything else that differs is drift (chain − ours).

/** What a row holds of a channel (micro-USDC). */
export interface ChannelMirror {
  readonly id: string
  readonly balance: bigint
  readonly chargedCumulative: bigint
  readonly claimedCumulative: bigint
  readonly settledCumulative: bigint
}

/** The contract's `channels(id)` at the block. */
export interface ChannelOnChain {
  readonly balance: bigint
  readonly totalClaimed: bigint
}

export interface DriftedChannel {
  readonly channelId: string
  readonly balance: bigint
  readonly chainBalance: bigint
  readonly claimedCumulative: bigint
  readonly chainTotalClaimed: bigint
}

export interface ChannelComparison {
  readonly checked: number
  readonly drifted: ReadonlyArray<DriftedChannel>
  /** Σ(chain − ours) of the balances that differ. */
  readonly balanceDrift: bigint
  /** Σ(chain − ours) where the chain claimed more than our rows say. */
  readonly claimedDrift: bigint
  /** Σ(ours − chain) where our claim is built and not on chain yet (at this block). */
  readonly claimsInFlight: bigint
}

/** Σ(chain − ours) of the balances, and of totalClaimed where the chain is ahead, over drifted channels. */
export const driftSums = (drifted: ReadonlyArray<DriftedChannel>) => {
  let balanceDrift = 0n
  let claimedDrift = 0n
  for (const d of drifted) {
    balanceDrift += d.chainBalance - d.balance
    if (d.chainTotalClaimed > d.claimedCumulative) claimedDrift += d.chainTotalClaimed - d.claimedCumulative
  }
  return { balanceDrift, claimedDrift }
}

/** Every row against its chain state (a missing state reads as an empty channel: never deposited, or drained). */
export const compareChannels = (rows: ReadonlyArray<ChannelMirror>, chain: ReadonlyMap<string, ChannelOnChain>): ChannelComparison => {
  const drifted: Array<DriftedChannel> = []
  let claimsInFlight = 0n
  for (const row of rows) {
    const on = chain.get(row.id) ?? { balance: 0n, totalClaimed: 0n }
    const claimedDiff = on.totalClaimed - row.claimedCumulative
    if (claimedDiff < 0n) claimsInFlight += -claimedDiff
    if (on.balance !== row.balance || claimedDiff > 0n) {
      drifted.push({ channelId: row.id, balance: row.balance, chainBalance: on.balance, claimedCumulative: row.claimedCumulative, chainTotalClaimed: on.totalClaimed })
    }
  }
  return { checked: rows.length, drifted, ...driftSums(drifted), claimsInFlight }
}

/** Σ(claimed − settled): what our rows say the contract holds claimed for us and has not settled yet. */
export const rowsPending = (rows: ReadonlyArray<ChannelMirror>) => rows.reduce((sum, r) => sum + r.claimedCumulative - r.settledCumulative, 0n)

/**
 * The receiver's claimed-unsettled pool on chain against our rows: chain − (ours − claims in flight). Positive when
 * the contract holds more for us than the rows explain.
 */
export const pendingDrift = (chainPending: bigint, ours: bigint, claimsInFlight: bigint) => chainPending - (ours - claimsInFlight)

/** Two checks agree on a disagreement: the same channels drifted by the same amounts (a mirror merely lagging moves on). */
export const sameDrift = (a: ChannelComparison, b: ChannelComparison) => {
  const key = (d: DriftedChannel) => `${d.channelId}:${d.chainBalance - d.balance}:${d.chainTotalClaimed - d.claimedCumulative}`
  const first = new Set(a.drifted.map(key))
  return b.drifted.filter((d) => first.has(key(d)))
}
