// How deep a block must be before what it holds counts as final (CHAIN_CONFIRMATIONS): a default per chain, 1 on a devnet.
import { Config, Effect, Option } from "effect"

/**
 * Blocks (the block holding a transaction counts as one) before a treasury transaction is final, by chain id. Our
 * money is booked when a transaction is included (the paid call answers then, as x402 facilitators do); finality is
 * when a reorg can no longer take it away, so the reconciliation compares at the last final block and a transaction
 * reorged out before that is sent again. Ethereum: 12 blocks (2.4 min; post-merge reorgs deeper than 2 blocks have
 * not been seen, full finality is ~64). Base: 10 blocks (20 s; the sequencer's unsafe head can be reorged when a batch
 * fails to post, which is rare and shallow). Testnets: half of that. Unknown chains: Ethereum's.
 */
export const DEFAULT_CONFIRMATIONS: Readonly<Record<number, number>> = { 1: 12, 11155111: 6, 8453: 10, 84532: 5 }
export const UNKNOWN_CHAIN_CONFIRMATIONS = 12
export const MAX_CONFIRMATIONS = 64

export const defaultConfirmations = (mode: "devnet" | "rpc", chainId: number) =>
  mode === "devnet" ? 1 : DEFAULT_CONFIRMATIONS[chainId] ?? UNKNOWN_CHAIN_CONFIRMATIONS

/** CHAIN_CONFIRMATIONS, when set: 1 to 64. */
export const configuredConfirmations = Config.option(
  Config.integer("CHAIN_CONFIRMATIONS").pipe(
    Config.validate({
      message: `CHAIN_CONFIRMATIONS must be an integer from 1 to ${MAX_CONFIRMATIONS}`,
      validation: (n) => n >= 1 && n <= MAX_CONFIRMATIONS
    })
  )
)

/** The last block whose contents are final when `latest` is the chain's head. */
export const finalBlock = (latest: bigint, confirmations: number) => {
  const b = latest - BigInt(confirmations - 1)
  return b < 0n ? 0n : b
}

/** True when a transaction in `block` is final at head `latest`. */
export const isFinal = (block: bigint, latest: bigint, confirmations: number) => latest - block + 1n >= BigInt(confirmations)

export const resolveConfirmations = (mode: "devnet" | "rpc", chainId: number, configured: Option.Option<number>) =>
  Option.getOrElse(configured, () => defaultConfirmations(mode, chainId))

export const readConfirmations = (mode: "devnet" | "rpc", chainId: number) =>
  Effect.map(configuredConfirmations, (c) => resolveConfirmations(mode, chainId, c))
