// The treasury's fees: EIP-1559 fees read from the chain (one read serves ten seconds of signatures, the max fee doubled
// so a rising base fee does not strand them), never above TREASURY_MAX_FEE_PER_GAS_GWEI; and what a replacement of a
// transaction the chain's fees left behind may pay (docs/decisions/treasury-transactions.md, "Fee spikes and dropped transactions").
import { Clock, Config, Effect } from "effect"
import type { ChainShape } from "../../layers/Chain.js"
import { ChainReadError } from "./chainReads.js"

export interface Fees {
  readonly maxFeePerGas: bigint
  readonly maxPriorityFeePerGas: bigint
}

/** The configured ceiling per gas, in wei. */
export const maxFeeCeiling = Config.integer("TREASURY_MAX_FEE_PER_GAS_GWEI").pipe(
  Config.withDefault(500),
  Config.validate({ message: "TREASURY_MAX_FEE_PER_GAS_GWEI must be a positive integer", validation: (n) => n > 0 }),
  Config.map((gwei) => BigInt(gwei) * 1_000_000_000n)
)

const min = (a: bigint, b: bigint) => (a < b ? a : b)
const max = (a: bigint, b: bigint) => (a > b ? a : b)

/** Fees capped by the ceiling, the priority fee never above the max fee. */
const capped = (fees: Fees, ceiling: bigint): Fees => {
  const maxFeePerGas = min(fees.maxFeePerGas, ceiling)
  return { maxFeePerGas, maxPriorityFeePerGas: min(fees.maxPriorityFeePerGas, maxFeePerGas) }
}

/** The fees to sign new transactions with, read from the chain at most every 10 s. */
export const feeSource = (chain: Pick<ChainShape, "publicClient">, ceiling: bigint) => {
  let cached: (Fees & { readonly at: number }) | undefined
  return Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    if (cached !== undefined && now - cached.at < 10_000) return cached
    const estimate = yield* Effect.tryPromise({
      try: () => chain.publicClient.estimateFeesPerGas(),
      catch: (error) => new ChainReadError({ message: `fee estimate failed: ${String(error).slice(0, 200)}` })
    })
    cached = { at: now, ...capped({ maxFeePerGas: estimate.maxFeePerGas * 2n, maxPriorityFeePerGas: estimate.maxPriorityFeePerGas }, ceiling) }
    return cached
  })
}

/** What a replacement decision says: not needed, not allowed (past the ceiling), or these fees. */
export type Replacement =
  | { readonly _tag: "NotNeeded" }
  | { readonly _tag: "PastCeiling" }
  | { readonly _tag: "Replace"; readonly fees: Fees }

/**
 * A transaction signed with `old` is left behind when its max fee is below the latest base fee plus the priority fee of
 * the moment. Its replacement pays at least 12.5% more on both fees (nodes refuse less than +10%) and at least
 * 2 × base fee + priority, capped by the ceiling; when even +12.5% passes the ceiling it is not replaced.
 */
export const replacementFees = (old: Fees, chainNow: { readonly baseFee: bigint; readonly priorityFee: bigint }, ceiling: bigint): Replacement => {
  if (old.maxFeePerGas >= chainNow.baseFee + chainNow.priorityFee) return { _tag: "NotNeeded" }
  const bump = (fee: bigint) => fee + fee / 8n + 1n
  if (bump(old.maxFeePerGas) > ceiling) return { _tag: "PastCeiling" }
  return {
    _tag: "Replace",
    fees: capped({
      maxFeePerGas: max(bump(old.maxFeePerGas), chainNow.baseFee * 2n + chainNow.priorityFee),
      maxPriorityFeePerGas: max(bump(old.maxPriorityFeePerGas), chainNow.priorityFee)
    }, ceiling)
  }
}
