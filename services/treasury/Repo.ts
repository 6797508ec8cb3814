// Treasury transactions in PostgreSQL: nonce allocation, the signed rows, their machine snapshots and leases.
import { SqlClient, type SqlError, type Statement } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { historyStatement } from "../../machines/runner.js"
import { startMachine } from "../../machines/step.js"
import { treasuryTxMachine } from "../../machines/treasuryTx.js"
import { batch } from "../sql/Batch.js"

export const TreasuryPurpose = Schema.Literal("settlement", "settlement_batch", "refund", "gap_fill", "withdrawal", "account_deploy", "remainder_batch",
  "channel_deposit", "channel_claim", "channel_settle", "channel_refund", "upto_settle")
export type TreasuryPurpose = typeof TreasuryPurpose.Type

export const TreasuryTxRow = Schema.Struct({
  id: Schema.String,
  purpose: TreasuryPurpose,
  subjectId: Schema.String,
  signer: Schema.String,
  /** The network the transaction is on ('' for rows from before networks, adopted by the primary at start). */
  network: Schema.String,
  nonce: Schema.BigInt,
  toAddress: Schema.String,
  rawTx: Schema.String,
  txHash: Schema.String,
  /** Earlier bytes of the same nonce, replaced with higher fees (any of them may be the one mined). */
  replacedHashes: Schema.Array(Schema.String),
  state: Schema.Literal("signed", "broadcast", "mined", "reorged", "confirmed", "reverted", "dropped"),
  machineSnapshot: Schema.Unknown,
  blockNumber: Schema.NullOr(Schema.BigInt),
  attempts: Schema.Number,
  createdAt: Schema.DateFromSelf
})
export type TreasuryTxRow = typeof TreasuryTxRow.Type
const decodeRows = Schema.decodeUnknown(Schema.Array(TreasuryTxRow))

export class TreasuryRepo extends Effect.Service<TreasuryRepo>()("treasury/TreasuryRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = (effect: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) => Effect.flatMap(effect, (r) => Effect.orDie(decodeRows(r)))

    /** Makes sure the signer has a nonce row at least `chainNonce` (the chain's count of its mined transactions). */
    const ensureSigner = (network: string, address: string, chainNonce: bigint) =>
      sql`INSERT INTO treasury_signers (network, address, next_nonce) VALUES (${network}, ${address.toLowerCase()}, ${chainNonce.toString()})
          ON CONFLICT (network, address) DO UPDATE SET next_nonce = GREATEST(treasury_signers.next_nonce, EXCLUDED.next_nonce), updated_at = now()`
        .pipe(Effect.asVoid)

    /** Takes the next nonce; the row stays locked until the caller's transaction ends (so it is stored or given back). */
    const allocateNonce = (network: string, address: string) =>
      sql<{ nonce: string }>`UPDATE treasury_signers SET next_nonce = next_nonce + 1, updated_at = now()
          WHERE network = ${network} AND address = ${address.toLowerCase()} RETURNING (next_nonce - 1)::text AS nonce`.pipe(
        Effect.flatMap((r) => (r[0] === undefined ? Effect.dieMessage(`treasury signer ${address} has no nonce row`) : Effect.succeed(BigInt(r[0].nonce))))
      )

    /** Stores a signed transaction with its first machine snapshot and history row. */
    const insert = (input: {
      readonly id: string
      readonly purpose: TreasuryPurpose
      readonly subjectId: string
      readonly signer: string
      readonly network: string
      readonly nonce: bigint
      readonly to: string
      readonly raw: string
      readonly hash: string
      readonly leaseUntil: Date
    }, also: ReadonlyArray<Statement.Fragment> = []) => {
      const start = startMachine(treasuryTxMachine, {})
      // One round trip: the row, its first transition and `also` (statements that only need the row to exist, e.g. links).
      return batch(sql, [
        sql`INSERT INTO treasury_txs ${sql.insert({
          id: input.id,
          purpose: input.purpose,
          subjectId: input.subjectId,
          signer: input.signer.toLowerCase(),
          network: input.network,
          nonce: input.nonce.toString(),
          toAddress: input.to.toLowerCase(),
          rawTx: input.raw,
          txHash: input.hash.toLowerCase(),
          state: start.state,
          machineSnapshot: JSON.stringify(start.persisted),
          leaseUntil: input.leaseUntil
        })}`,
        historyStatement(sql, [{ machine: "treasury", actorId: input.id, event: { type: "SIGNED" }, from: null, to: start.state, at: Date.now() }]),
        ...also
      ]).pipe(Effect.asVoid)
    }

    const lock = (id: string) => rows(sql`SELECT * FROM treasury_txs WHERE id = ${id} FOR UPDATE`).pipe(Effect.map((r) => Option.fromNullable(r[0])))
    /** The machine's row for an optimistic unit of work (services/sql/UnitOfWork.ts `guardedRead`). */
    const guarded = {
      select: (id: string, lock: boolean) => sql`SELECT * FROM treasury_txs WHERE id = ${id} ${lock ? sql`FOR UPDATE` : sql``}`,
      decode: (r: ReadonlyArray<unknown>) => Effect.map(Effect.orDie(decodeRows(r)), (decoded) => Option.fromNullable(decoded[0]))
    }
    const find = (id: string) => rows(sql`SELECT * FROM treasury_txs WHERE id = ${id}`).pipe(Effect.map((r) => Option.fromNullable(r[0])))

    /** Unfinished transactions whose lease ran out, lowest nonce first; leased to the caller for `leaseMs`. */
    const claimDue = (now: number, leaseMs: number, limit: number) =>
      rows(sql`
        UPDATE treasury_txs SET lease_until = ${new Date(now + leaseMs)}, attempts = attempts + 1
        WHERE id IN (SELECT id FROM treasury_txs WHERE state IN ('signed', 'broadcast') AND lease_until <= ${new Date(now)}
                     ORDER BY nonce LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING *`).pipe(Effect.map((r) => [...r].sort((a, b) => (a.nonce < b.nonce ? -1 : a.nonce > b.nonce ? 1 : 0))))

    /** The signer's unfinished transactions, whatever their lease, lowest nonce first (the start's rebroadcast). */
    const unfinishedOf = (network: string, signer: string, limit: number) =>
      rows(sql`SELECT * FROM treasury_txs WHERE network = ${network} AND signer = ${signer.toLowerCase()} AND state IN ('signed', 'broadcast')
               ORDER BY nonce LIMIT ${limit}`)

    /** Keeps a transaction leased to this process while it waits for its receipt. */
    /** The transaction of `purpose` for `subjectId` still signed or broadcast (not yet mined or dropped), if any. */
    const liveFor = (purpose: TreasuryPurpose, subjectId: string) =>
      rows(sql`SELECT * FROM treasury_txs WHERE purpose = ${purpose} AND subject_id = ${subjectId} AND state IN ('signed', 'broadcast') LIMIT 1`).pipe(
        Effect.map((r) => Option.fromNullable(r[0]))
      )
    const renewLease = (id: string, until: Date) =>
      sql`UPDATE treasury_txs SET lease_until = ${until} WHERE id = ${id} AND state IN ('signed', 'broadcast')`.pipe(Effect.asVoid)

    /** Nonces in [from, to) that have no live transaction: gaps that block every later transaction of the signer. */
    const gaps = (network: string, signer: string, from: bigint, to: bigint) =>
      sql<{ nonce: string }>`
        SELECT n::text AS nonce FROM generate_series(${from.toString()}::bigint, ${(to - 1n).toString()}::bigint) AS n
        WHERE NOT EXISTS (SELECT 1 FROM treasury_txs t WHERE t.network = ${network} AND t.signer = ${signer.toLowerCase()} AND t.nonce = n AND t.state <> 'dropped')
        LIMIT 100`.pipe(Effect.map((r) => r.map((x) => BigInt(x.nonce))))

    const nextNonce = (network: string, signer: string) =>
      sql<{ nextNonce: string }>`SELECT next_nonce::text AS next_nonce FROM treasury_signers WHERE network = ${network} AND address = ${signer.toLowerCase()}`.pipe(
        Effect.map((r) => Option.map(Option.fromNullable(r[0]), (x) => BigInt(x.nextNonce)))
      )

    /**
     * The row's bytes become a replacement of the same nonce (higher fees); the bytes it replaces are kept. Only while
     * the row still holds `previousHash` and is unfinished: false when another process replaced or finished it first.
     */
    const replaceStatement = (id: string, previousHash: string, raw: string, hash: string) =>
      sql<{ id: string }>`UPDATE treasury_txs SET raw_tx = ${raw}, tx_hash = ${hash.toLowerCase()},
          replaced_hashes = array_append(replaced_hashes, tx_hash), updated_at = now()
        WHERE id = ${id} AND tx_hash = ${previousHash.toLowerCase()} AND state IN ('signed', 'broadcast', 'reorged') RETURNING id`.pipe(
        Effect.map((r) => r.length === 1)
      )

    /** Included transactions not yet final, and those a reorg took out: the finality follower's rows, lowest nonce first. */
    const notFinal = (limit: number) =>
      rows(sql`SELECT * FROM treasury_txs WHERE state IN ('mined', 'reorged') ORDER BY nonce LIMIT ${limit}`)

    /** The block a reorged transaction was included in again (the ledger's own rows are append-only). */
    const reincludedStatement = (hash: string, block: bigint) =>
      sql`INSERT INTO chain_reinclusions (tx_hash, block_number) VALUES (${hash.toLowerCase()}, ${block.toString()})
          ON CONFLICT (tx_hash) DO UPDATE SET block_number = EXCLUDED.block_number, recorded_at = now()`.pipe(Effect.asVoid)

    /**
     * The primary network takes over the nonce rows and transactions written before networks existed (network ''):
     * their nonces are its chain's. The signer's row moves with ON UPDATE CASCADE; idempotent.
     */
    const adoptLegacy = (primary: string) =>
      sql.withTransaction(Effect.gen(function* () {
        const taken = yield* sql<{ address: string }>`SELECT address FROM treasury_signers WHERE network = ${primary}`
        if (taken.length === 0) yield* sql`UPDATE treasury_signers SET network = ${primary} WHERE network = ''`
        yield* sql`UPDATE treasury_txs SET network = ${primary} WHERE network = ''`
        yield* sql`UPDATE treasury_reconciliations SET network = ${primary} WHERE network = ''`
      })).pipe(Effect.asVoid)

    return { adoptLegacy, notFinal, reincludedStatement, ensureSigner, allocateNonce, insert, lock, guarded, find, liveFor, claimDue, unfinishedOf, renewLease, gaps, nextNonce, replaceStatement } as const
  })
}) {}
