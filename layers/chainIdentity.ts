// Which chain the database belongs to, per network: chain id, genesis block hash, USDC and batcher addresses. Recorded
// at the first start on a network, compared at every later one under the start-up lock, before any service is built:
// a database of another chain (a new devnet, a different RPC) refuses the start with one line, and nothing is sent.
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, Effect, Layer, Option, Redacted } from "effect"
import * as path from "node:path"
import type { ChainShape } from "./Chain.js"
import { AppConfig } from "./Config.js"
import { Networks } from "./Networks.js"
import { DatabaseInfo } from "./Pg.js"
import { withStartupLock } from "./startupLock.js"

export class ChainIdentityError extends Data.TaggedError("ChainIdentityError")<{ readonly message: string }> {}

export interface ChainIdentity {
  readonly network: string
  readonly primary: boolean
  readonly chainId: number
  readonly genesisHash: string
  readonly usdc: string
  readonly batcher: string | null
}

/** What a start does about one network: record it, complete its record (a batcher set later), or nothing. */
export type IdentityStep =
  | { readonly _tag: "Record" }
  | { readonly _tag: "SetBatcher" }
  | { readonly _tag: "Same" }
  | { readonly _tag: "Mismatch"; readonly what: string }

const describe = (i: ChainIdentity) =>
  `chain id ${i.chainId}, genesis ${i.genesisHash}, USDC ${i.usdc}${i.batcher === null ? "" : `, batcher ${i.batcher}`}`

/**
 * The comparison, pure: the recorded identities against one configured network. A batcher configured where none was
 * recorded completes the record; any other difference is another chain (or a token or batcher whose rows these are not).
 */
export const compareIdentity = (recorded: ReadonlyArray<ChainIdentity>, current: ChainIdentity): IdentityStep => {
  const same = recorded.find((r) => r.network === current.network)
  if (same === undefined) {
    const otherPrimary = current.primary ? recorded.find((r) => r.primary) : undefined
    return otherPrimary === undefined
      ? { _tag: "Record" }
      : { _tag: "Mismatch", what: `it belongs to network "${otherPrimary.network}" (${describe(otherPrimary)}), not "${current.network}"` }
  }
  const differences = [
    ...(same.chainId !== current.chainId ? [`chain id ${current.chainId}`] : []),
    ...(same.genesisHash !== current.genesisHash ? [`genesis ${current.genesisHash}`] : []),
    ...(same.usdc.toLowerCase() !== current.usdc.toLowerCase() ? [`USDC ${current.usdc}`] : []),
    ...(same.batcher !== null && same.batcher.toLowerCase() !== (current.batcher ?? "").toLowerCase() ? [`batcher ${current.batcher ?? "none"}`] : [])
  ]
  if (differences.length > 0) {
    return { _tag: "Mismatch", what: `network "${same.network}" is ${describe(same)}, but the chain now has ${differences.join(", ")}` }
  }
  return same.batcher === null && current.batcher !== null ? { _tag: "SetBatcher" } : { _tag: "Same" }
}

/** A network's identity as its RPC reports it (the genesis block's hash: one call). */
export const identityOf = (chain: ChainShape, primary: boolean) =>
  Effect.tryPromise({
    try: () => chain.publicClient.getBlock({ blockNumber: 0n }),
    catch: (error) => new ChainIdentityError({ message: `chain RPC ${chain.rpcUrl} did not give its genesis block: ${String(error).split("\n")[0]}` })
  }).pipe(
    Effect.map((genesis): ChainIdentity => ({
      network: chain.network,
      primary,
      chainId: chain.chainId,
      genesisHash: genesis.hash,
      usdc: chain.usdc.address,
      batcher: Option.getOrNull(chain.batcher)
    }))
  )

interface IdentityRow {
  readonly network: string
  readonly isPrimary: boolean
  readonly chainId: string
  readonly genesisHash: string
  readonly usdcAddress: string
  readonly batcherAddress: string | null
}

/**
 * A database from before identities were recorded holds no record: its newest confirmed treasury transaction on the
 * primary network must then be on this chain, or the database is another chain's.
 */
const legacyEvidence = (sql: SqlClient.SqlClient, chain: ChainShape) =>
  Effect.gen(function* () {
    const rows = yield* sql<{ readonly txHash: string }>`
      SELECT tx_hash FROM treasury_txs WHERE state = 'confirmed' AND network IN (${chain.network}, '')
      ORDER BY mined_at DESC NULLS LAST, created_at DESC LIMIT 1`
    const hash = rows[0]?.txHash
    if (hash === undefined) return Option.none<string>()
    const receipt = yield* Effect.tryPromise({
      try: () => chain.publicClient.request({ method: "eth_getTransactionReceipt", params: [hash as `0x${string}`] }),
      catch: (error) => new ChainIdentityError({ message: `chain RPC ${chain.rpcUrl} did not answer: ${String(error).split("\n")[0]}` })
    })
    return receipt === null ? Option.some(`its confirmed treasury transaction ${hash} is not on the chain at ${chain.rpcUrl}`) : Option.none<string>()
  })

/** Compares (and records) every network's identity; fails with one line naming the mismatch and `advice`. */
export const checkChainIdentities = (networks: ReadonlyArray<ChainShape>, advice: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const current = yield* Effect.forEach(networks, (chain, i) => identityOf(chain, i === 0), { concurrency: "unbounded" })
    const rows = yield* sql<IdentityRow>`SELECT network, is_primary, chain_id, genesis_hash, usdc_address, batcher_address FROM chain_identities`
    const recorded = rows.map((r): ChainIdentity => ({
      network: r.network, primary: r.isPrimary, chainId: Number(r.chainId), genesisHash: r.genesisHash, usdc: r.usdcAddress, batcher: r.batcherAddress
    }))
    const refuse = (what: string) => new ChainIdentityError({ message: `this database belongs to another chain: ${what}. ${advice}; nothing was sent` })
    const primary = networks[0]
    if (recorded.length === 0 && primary !== undefined) {
      const evidence = yield* legacyEvidence(sql, primary)
      if (Option.isSome(evidence)) return yield* refuse(evidence.value)
    }
    for (const identity of current) {
      const step = compareIdentity(recorded, identity)
      switch (step._tag) {
        case "Mismatch":
          return yield* refuse(step.what)
        case "Record":
          yield* sql`INSERT INTO chain_identities ${sql.insert({
            network: identity.network,
            isPrimary: identity.primary,
            chainId: identity.chainId,
            genesisHash: identity.genesisHash,
            usdcAddress: identity.usdc,
            batcherAddress: identity.batcher
          })}`
          yield* Effect.logInfo(`this database now belongs to network "${identity.network}" (${describe(identity)})`)
          break
        case "SetBatcher":
          yield* sql`UPDATE chain_identities SET batcher_address = ${identity.batcher} WHERE network = ${identity.network}`
          break
        case "Same":
          break
      }
    }
  }).pipe(Effect.withSpan("ChainIdentity.check"))

/** What an operator does about a mismatch, for the way this service runs. */
const adviceFor = (mode: "devnet" | "rpc", db: DatabaseInfo, dataDir: string): string => {
  if (mode === "devnet" && db.mode === "embedded") {
    const link = path.join(path.resolve(dataDir), "postgres")
    const where = db.dataDir !== undefined && db.dataDir !== link ? `${link} (the database, kept in ${db.dataDir})` : link
    return `To start over on this devnet, stop the service and delete ${where}, or all of DATA_DIR ${path.resolve(dataDir)} to start the chain over too`
  }
  if (mode === "devnet") return "To start over on this devnet, give it a fresh database (a new, empty DATABASE_URL)"
  return "Point the RPC setting at the chain this database belongs to, or give this chain a new, empty database (DATABASE_URL)"
}

/** At start, before any service: every configured network against the database's record, under the start-up lock. */
export const ChainIdentityLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const networks = yield* Networks
    const db = yield* DatabaseInfo
    const config = yield* AppConfig
    const check: Effect.Effect<void, ChainIdentityError | SqlError, SqlClient.SqlClient> =
      checkChainIdentities(networks.all, adviceFor(networks.primary.mode, db, config.dataDir))
    yield* Redacted.value(db.url) === "" ? check : check.pipe(withStartupLock(db.url))
  })
)
