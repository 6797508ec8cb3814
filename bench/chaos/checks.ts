// After each round, once the cluster has finished what the round started: the money checks. Every payer was charged on
// chain exactly what its settled payments less its confirmed refunds say; every failed call whose payment settled was
// refunded (once: one refund row per execution, confirmed on chain); every completed call's payment settled; agents'
// balances equal their completed calls' earnings and their ledger entries; the treasury's drift is 0
// at the last final block; and no execution is left unfinished.
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import pg from "pg"
import { createPublicClient, http } from "viem"
import { batchSettlementAbi } from "../../layers/x402/batchSettlement/contract.js"
import { DEV_PRIVATE_KEYS, DEVNET_USDC_ADDRESS } from "../../layers/devnet/anvil.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { privateKeyToAccount } from "viem/accounts"
import { at, PARAMS, sleep } from "../lib/params.js"
import type { Cluster } from "./cluster.js"
import { mine } from "./faults.js"
import { PAYERS } from "./load.js"

export const payerAddresses = () => PAYERS.map((i) => privateKeyToAccount(DEV_PRIVATE_KEYS[i]!).address)

export const balancesOf = async (cluster: Cluster, addresses: ReadonlyArray<`0x${string}`>) => {
  const client = createPublicClient({ transport: http(cluster.anvilUrl) })
  const out = new Map<string, bigint>()
  for (const a of addresses) {
    out.set(a.toLowerCase(), await client.readContract({ address: DEVNET_USDC_ADDRESS, abi: usdcAbi, functionName: "balanceOf", args: [a] }))
  }
  return out
}

const query = async <R>(cluster: Cluster, text: string, values: ReadonlyArray<unknown> = []): Promise<Array<R>> => {
  const client = new pg.Client({ connectionString: cluster.databaseUrl })
  await client.connect()
  try {
    return (await client.query(text, [...values])).rows as Array<R>
  } finally {
    await client.end().catch(() => undefined)
  }
}

const OPEN = `SELECT
  (SELECT count(*) FROM payments WHERE status IN ('reserved', 'retrying'))::int AS payments,
  (SELECT count(*) FROM treasury_txs WHERE state IN ('signed', 'broadcast', 'mined', 'reorged'))::int AS txs,
  (SELECT count(*) FROM refunds WHERE status IN ('pending', 'submitted'))::int AS refunds,
  (SELECT count(*) FROM executions x JOIN payments p ON p.id = x.payment_id
    WHERE x.status = 'pending' OR (x.status IN ('failed', 'timeout') AND p.status = 'settled' AND p.purpose <> 'channel'))::int AS executions,
  (SELECT count(*) FROM channel_charges WHERE status IN ('charged', 'kept'))::int AS charges,
  (SELECT count(*) FROM channels WHERE claimed_cumulative <> claimed_on_chain OR claimed_on_chain <> settled_cumulative)::int AS unsettled`

/**
 * What the round started and the cluster has not finished. Channels count until every kept charge is claimed and every
 * claim settled: a claim or settle sent just after a check of the rest would otherwise be mined above the final block
 * the money checks read, while its booking is already in the rows.
 */
interface Open { payments: number; txs: number; refunds: number; executions: number; charges: number; unsettled: number }

const openCount = (o: Open) => o.payments + o.txs + o.refunds + o.executions + o.charges + o.unsettled

/** Waits (mining blocks so that inclusions become final) until nothing the round started is open, or `ms` passed. */
export const settle = async (cluster: Cluster, confirmations: number, ms: number): Promise<Open> => {
  const deadline = Date.now() + ms
  for (;;) {
    await mine(cluster, confirmations).catch(() => undefined)
    const open = await query<Open>(cluster, OPEN).then((r) => r[0]!, () => undefined)
    if (open !== undefined && openCount(open) === 0) return open
    if (Date.now() > deadline) return open ?? { payments: -1, txs: -1, refunds: -1, executions: -1, charges: -1, unsettled: -1 }
    await sleep(2_000)
  }
}

const drift = async (cluster: Cluster) => {
  const answer = await fetch(`${cluster.balancer}/api/v1/operator/treasury/reconciliation`, {
    headers: { authorization: `Bearer ${PARAMS.operatorToken}`, "x-operator": "chaos" },
    signal: AbortSignal.timeout(30_000)
  })
  const body: unknown = await answer.json()
  const channels = at(body, "data", "channels", "current")
  return { drift: String(at(body, "data", "current", "drift")), current: at(body, "data", "current"), channels: Array.isArray(channels) ? channels : [] }
}

/**
 * Channel payers: each channel's charged total is exactly the prices of its completed calls (a failed call kept
 * nothing); the row mirrors channels(id) on chain (balance, what was claimed); the payer's USDC that left its wallet is
 * exactly what sits in its channels (no refund happens during the campaign).
 */
const channelId = (id: string): `0x${string}` => {
  if (!/^0x[0-9a-f]{64}$/.test(id)) throw new Error(`not a channel id: ${id}`)
  return `0x${id.slice(2)}`
}

const channelAnomalies = async (cluster: Cluster, payers: ReadonlyMap<string, bigint>): Promise<Array<string>> => {
  const anomalies: Array<string> = []
  const rows = await query<{ id: string; payer: string; balance: string; charged: string; claimed: string; completed: string }>(cluster, `
    SELECT c.id, c.payer, c.balance::text, c.charged_cumulative::text AS charged, c.claimed_on_chain::text AS claimed,
      (SELECT COALESCE(SUM(x.price), 0) FROM executions x JOIN payments p ON p.id = x.payment_id
        WHERE p.channel_id = c.id AND x.status = 'completed')::text AS completed
    FROM channels c`)
  const client = createPublicClient({ transport: http(cluster.anvilUrl) })
  const inChannels = new Map<string, bigint>()
  for (const row of rows) {
    if (row.charged !== row.completed) anomalies.push(`channel ${row.id}: charged ${row.charged}, its completed calls cost ${row.completed}`)
    const [balance, totalClaimed] = await client.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: "channels", args: [channelId(row.id)] })
    if (String(balance) !== row.balance || String(totalClaimed) !== row.claimed) {
      anomalies.push(`channel ${row.id}: on chain balance ${balance}, claimed ${totalClaimed}; the row says ${row.balance}, ${row.claimed}`)
    }
    inChannels.set(row.payer, (inChannels.get(row.payer) ?? 0n) + balance)
  }
  const now = await balancesOf(cluster, [...payers.keys()] as Array<`0x${string}`>)
  for (const [payer, before] of payers) {
    const spent = before - (now.get(payer) ?? 0n)
    const held = inChannels.get(payer) ?? 0n
    if (spent !== held) anomalies.push(`channel payer ${payer}: ${spent} left its wallet, its channels hold ${held}`)
  }
  return anomalies
}

/** The anomalies found now (none: an empty list). `initial`, `channelPayers`: the payers' USDC before the campaign. */
export const check = async (cluster: Cluster, initial: ReadonlyMap<string, bigint>, channelPayers: ReadonlyMap<string, bigint>, open: Open): Promise<Array<string>> => {
  const anomalies: Array<string> = []
  if (openCount(open) !== 0) anomalies.push(`left unfinished: ${JSON.stringify(open)}`)
  const now = await balancesOf(cluster, payerAddresses())
  const charged = await query<{ payer: string; settled: string; refunded: string }>(cluster, `
    SELECT p.payer, COALESCE(SUM(p.amount) FILTER (WHERE p.status = 'settled'), 0)::text AS settled,
      (SELECT COALESCE(SUM(r.amount), 0) FROM refunds r WHERE lower(r.to_address) = p.payer AND r.status = 'confirmed')::text AS refunded
    FROM payments p WHERE p.payer = ANY($1) GROUP BY p.payer`, [[...initial.keys()]])
  for (const [payer, before] of initial) {
    const row = charged.find((c) => c.payer === payer)
    const expected = row === undefined ? 0n : BigInt(row.settled) - BigInt(row.refunded)
    const spent = before - (now.get(payer) ?? 0n)
    if (spent !== expected) anomalies.push(`payer ${payer}: paid ${spent} on chain, the ledger says ${expected} (settled less refunded)`)
  }
  const unrefunded = await query<{ id: string; status: string; refund: string | null }>(cluster, `
    SELECT x.id, x.status, r.status AS refund FROM executions x JOIN payments p ON p.id = x.payment_id
    LEFT JOIN refunds r ON r.execution_id = x.id
    WHERE x.status IN ('failed', 'timeout', 'refunded') AND p.status = 'settled' AND p.purpose <> 'channel'
      AND r.status IS DISTINCT FROM 'confirmed'`)
  for (const u of unrefunded) anomalies.push(`execution ${u.id} ${u.status}: its settled payment's refund is ${u.refund ?? "missing"}`)
  const unpaid = await query<{ id: string; payment: string }>(cluster, `
    SELECT x.id, p.status AS payment FROM executions x JOIN payments p ON p.id = x.payment_id WHERE x.status = 'completed' AND p.status <> 'settled'`)
  for (const u of unpaid) anomalies.push(`execution ${u.id} completed with its payment ${u.payment}`)
  const agents = await query<{ agent: string; balance: string; earned: string }>(cluster, `
    SELECT a.id::text AS agent,
      (SELECT COALESCE(-SUM(balance), 0) FROM ledger_accounts WHERE id IN ('agent:' || a.id || ':available', 'agent:' || a.id || ':pending'))::text AS balance,
      (SELECT COALESCE(SUM(agent_earnings), 0) FROM executions WHERE agent_id = a.id AND status = 'completed')::text AS earned
    FROM agents a`)
  for (const a of agents) if (a.balance !== a.earned) anomalies.push(`agent ${a.agent}: balance ${a.balance}, completed calls earned ${a.earned}`)
  const accounts = await query<{ id: string; balance: string; entries: string }>(cluster, `
    SELECT a.id, a.balance::text AS balance, COALESCE((SELECT SUM(amount) FROM ledger_entries e WHERE e.account_id = a.id), 0)::text AS entries
    FROM ledger_accounts a WHERE a.id LIKE 'agent:%' AND a.balance <> COALESCE((SELECT SUM(amount) FROM ledger_entries e WHERE e.account_id = a.id), 0)`)
  for (const a of accounts) anomalies.push(`ledger account ${a.id}: balance ${a.balance}, entries ${a.entries}`)
  const unbalanced = await query<{ id: string }>(cluster, `SELECT transfer_id AS id FROM ledger_entries GROUP BY transfer_id HAVING SUM(amount) <> 0`)
  for (const t of unbalanced) anomalies.push(`ledger transfer ${t.id} does not balance`)
  const d = await drift(cluster).catch((e: unknown) => ({ drift: `unreadable (${String(e)})`, current: undefined, channels: [] }))
  if (d.drift !== "0") anomalies.push(`treasury drift ${d.drift} at the last final block: ${JSON.stringify(d.current)}`)
  for (const c of d.channels) {
    if (at(c, "receivableDrift") !== "0" || at(c, "pendingDrift") !== "0" || at(c, "channelsDrifted") !== 0) {
      anomalies.push(`channel reconciliation drifted at the last final block: ${JSON.stringify(c)}`)
    }
  }
  anomalies.push(...await channelAnomalies(cluster, channelPayers))
  return anomalies
}
