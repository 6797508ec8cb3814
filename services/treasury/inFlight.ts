// Money in flight at a block: what the chain had done by block B that the ledger books only later. A payment whose
// authorization was used by B is booked with its execution's outcome (a 30 s agent call, a recovery after a crash); a
// payout mined by B is booked when its receipt is followed. Neither is drift: the reconciliation subtracts both.
import { type SqlClient, type SqlError } from "@effect/sql"
import { Effect, Option } from "effect"
import { getAddress, type Hex, isAddressEqual, isHex } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { ChainReadError, receiptOf, transfersIn } from "./chainReads.js"

/** What the ledger has not booked yet, read in the same snapshot as its balance. */
export interface Unbooked {
  /** Payments reserved or retrying: their money reaches the ledger with their settlement's booking. */
  readonly payments: ReadonlyArray<{ readonly payer: string; readonly nonce: string; readonly amount: bigint }>
  /** Payout transactions (refunds, withdrawals) signed or broadcast: booked when their receipt is recorded. */
  readonly payouts: ReadonlyArray<{ readonly txHash: string }>
  /** Upto settles signed or broadcast: their charge is booked with the payment's settlement, once the receipt is recorded. */
  readonly uptoSettles?: ReadonlyArray<{ readonly txHash: string }>
}

export interface InFlight {
  /** Received by the treasury by the block, not yet in the ledger. */
  readonly incoming: bigint
  /** Paid out of the treasury by the block, not yet in the ledger. */
  readonly outgoing: bigint
  /** How many payments and payouts were looked at. */
  readonly items: number
}

/** Beyond this many open items the check says so instead of reading the chain item by item. */
export const MAX_IN_FLIGHT_ITEMS = 2_000

/** The ledger's open items for the chain's token, inside the caller's (repeatable-read) transaction. */
export const unbookedStatement = (
  sql: SqlClient.SqlClient,
  chain: Pick<ChainShape, "usdc">,
  /** The network's names in treasury_txs ('' too for the primary: rows from before networks). */
  networks: ReadonlyArray<string>
): Effect.Effect<Unbooked, SqlError.SqlError> =>
  Effect.gen(function* () {
    const payments = yield* sql<{ payer: string; nonce: string; amount: string }>`
      SELECT payer, nonce, amount::text AS amount FROM payments
      WHERE status IN ('reserved', 'retrying') AND purpose <> 'upto' AND lower(asset) = ${chain.usdc.address.toLowerCase()}
      LIMIT ${MAX_IN_FLIGHT_ITEMS + 1}`
    const payouts = yield* sql<{ txHash: string }>`
      SELECT tx_hash FROM treasury_txs WHERE purpose IN ('refund', 'withdrawal') AND state IN ('signed', 'broadcast') AND network IN ${sql.in(networks)}
      LIMIT ${MAX_IN_FLIGHT_ITEMS + 1}`
    const uptoSettles = yield* sql<{ txHash: string }>`
      SELECT tx_hash FROM treasury_txs WHERE purpose = 'upto_settle' AND state IN ('signed', 'broadcast') AND network IN ${sql.in(networks)}
      LIMIT ${MAX_IN_FLIGHT_ITEMS + 1}`
    return { payments: payments.map((p) => ({ ...p, amount: BigInt(p.amount) })), payouts, uptoSettles }
  })

/** Stored hashes and nonces are checked hex (column constraints); anything else reads as nothing. */
const hex = (s: string): Hex => (isHex(s) ? s : "0x")

const read = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (error) => new ChainReadError({ message: `${what}: ${String(error).slice(0, 200)}` }) })

/**
 * What of the unbooked items the chain had done by `block`: an authorization used by then paid the treasury exactly its
 * amount (EIP-3009 binds the recipient and the value); a payout mined by then moved what its Transfer logs say.
 */
export const inFlightAt = (chain: ChainShape, unbooked: Unbooked, block: bigint): Effect.Effect<InFlight, ChainReadError> =>
  Effect.gen(function* () {
    const uptoSettles = unbooked.uptoSettles ?? []
    const items = unbooked.payments.length + unbooked.payouts.length + uptoSettles.length
    if (unbooked.payments.length > MAX_IN_FLIGHT_ITEMS || unbooked.payouts.length > MAX_IN_FLIGHT_ITEMS || uptoSettles.length > MAX_IN_FLIGHT_ITEMS) {
      return yield* new ChainReadError({ message: `more than ${MAX_IN_FLIGHT_ITEMS} payments or payouts in flight: not checked item by item` })
    }
    const used = yield* Effect.forEach(unbooked.payments, (p) =>
      read("authorizationState", () =>
        chain.publicClient.readContract({
          address: chain.usdc.address,
          abi: usdcAbi,
          functionName: "authorizationState",
          args: [getAddress(p.payer), hex(p.nonce)],
          blockNumber: block
        })).pipe(Effect.map((isUsed) => (isUsed ? p.amount : 0n))), { concurrency: 8 })
    /** What the mined-by-`block` transactions moved from (`side` "from") or to the treasury. */
    const moved = (txs: ReadonlyArray<{ readonly txHash: string }>, side: "from" | "to") =>
      Effect.forEach(txs, (t) =>
        Effect.map(receiptOf(chain, hex(t.txHash)), (receipt) => {
          if (Option.isNone(receipt) || receipt.value.status !== "success" || receipt.value.blockNumber > block) return 0n
          return transfersIn(chain, receipt.value)
            .filter((transfer) => isAddressEqual(transfer[side], chain.treasury))
            .reduce((sum, transfer) => sum + transfer.value, 0n)
        }), { concurrency: 8 })
    const paid = yield* moved(unbooked.payouts, "from")
    // An upto settle moves the payer's charge to the treasury (through Permit2): incoming until its booking.
    const settled = yield* moved(uptoSettles, "to")
    const sum = (xs: ReadonlyArray<bigint>) => xs.reduce((a, b) => a + b, 0n)
    return { incoming: sum(used) + sum(settled), outgoing: sum(paid), items }
  })
