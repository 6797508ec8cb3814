// What paid calls cost on chain, for bench/channels.ts: every transaction in a range of blocks and its gas, and for
// channels the treasury's own transactions by purpose (deposits, claims, settles) from its treasury_txs rows and their
// receipts, with the vouchers each claim covered.
import pg from "pg"
import { keccak256, toHex } from "viem"
import { at, BenchError, sleep } from "./params.js"
import { rpcCall } from "./snapshot.js"

export interface RangeCost {
  readonly from: number
  readonly to: number
  readonly transactions: number
  readonly gasUsed: number
}

const num = (u: unknown) => (typeof u === "string" ? Number(BigInt(u)) : 0)

/** Transactions and gas of blocks from+1 .. to (only the phase under test sends transactions then). */
export const rangeCost = async (rpcUrl: string, from: number, to: number): Promise<RangeCost> => {
  let transactions = 0
  let gasUsed = 0
  for (let n = from + 1; n <= to; n++) {
    const block = await rpcCall(rpcUrl, "eth_getBlockByNumber", [toHex(n), false])
    const txs = at(block, "transactions")
    transactions += Array.isArray(txs) ? txs.length : 0
    gasUsed += num(at(block, "gasUsed"))
  }
  return { from, to, transactions, gasUsed }
}

const query = async <T>(databaseUrl: string, text: string): Promise<Array<T>> => {
  const client = new pg.Client(databaseUrl)
  await client.connect()
  try {
    return (await client.query(text)).rows as Array<T>
  } finally {
    await client.end()
  }
}

/** Waits (bounded) until every charge is claimed, every claim and settle is final and every claimed amount is settled. */
export const waitForClaimsAndSettles = async (databaseUrl: string, timeoutMs: number): Promise<{ readonly done: boolean; readonly waitedMs: number; readonly left: string }> => {
  const started = Date.now()
  for (;;) {
    const [row] = await query<{ charged: string; pending: string; unsettled: string }>(databaseUrl, `SELECT
      (SELECT count(*) FROM channel_charges WHERE status IN ('charged', 'kept'))::text AS charged,
      (SELECT count(*) FROM treasury_txs WHERE purpose LIKE 'channel\\_%' AND state NOT IN ('confirmed', 'reverted', 'dropped'))::text AS pending,
      (SELECT count(*) FROM channels WHERE settled_cumulative < claimed_cumulative)::text AS unsettled`)
    const left = `${row?.charged ?? "?"} charges unclaimed, ${row?.pending ?? "?"} channel transactions not final, ${row?.unsettled ?? "?"} channels not settled`
    if (row !== undefined && row.charged === "0" && row.pending === "0" && row.unsettled === "0") return { done: true, waitedMs: Date.now() - started, left }
    if (Date.now() - started > timeoutMs) return { done: false, waitedMs: Date.now() - started, left }
    await sleep(500)
  }
}

export interface PurposeCost {
  readonly transactions: number
  readonly gasUsed: number
}

export interface ChannelCost {
  /** Confirmed treasury transactions per channel purpose ('channel_deposit', 'channel_claim', 'channel_settle', ...). */
  readonly byPurpose: Readonly<Record<string, PurposeCost>>
  /** Charges (one per voucher-paid call) that claims took. */
  readonly claimedVouchers: number
  /** Claimed events in the claim transactions' receipts: channels claimed. */
  readonly claimedChannels: number
}

const CLAIMED = keccak256(toHex("Claimed(bytes32,address,uint128,uint128)"))

/** The channels' treasury transactions (confirmed) with their receipts' gas, and what the claims covered. */
export const channelCost = async (databaseUrl: string, rpcUrl: string): Promise<ChannelCost> => {
  const rows = await query<{ purpose: string; txHash: string }>(databaseUrl,
    `SELECT purpose, tx_hash AS "txHash" FROM treasury_txs WHERE purpose LIKE 'channel\\_%' AND state = 'confirmed'`)
  const byPurpose: Record<string, { transactions: number; gasUsed: number }> = {}
  let claimedChannels = 0
  for (const row of rows) {
    const receipt = await rpcCall(rpcUrl, "eth_getTransactionReceipt", [row.txHash])
    if (receipt === null || receipt === undefined) throw new BenchError(`no receipt for the confirmed ${row.purpose} ${row.txHash}`)
    const entry = (byPurpose[row.purpose] ??= { transactions: 0, gasUsed: 0 })
    entry.transactions++
    entry.gasUsed += num(at(receipt, "gasUsed"))
    if (row.purpose === "channel_claim") {
      const logs = at(receipt, "logs")
      claimedChannels += Array.isArray(logs) ? logs.filter((l: unknown) => Array.isArray(at(l, "topics")) && at(l, "topics", "0") === CLAIMED).length : 0
    }
  }
  const [charges] = await query<{ claimed: string }>(databaseUrl, `SELECT count(*)::text AS claimed FROM channel_charges WHERE status = 'claimed'`)
  return { byPurpose, claimedVouchers: Number(charges?.claimed ?? 0), claimedChannels }
}
