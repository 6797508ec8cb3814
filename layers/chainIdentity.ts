// Which chain the database belongs to, per network: chain id, the hash of block 1 (which commits to the genesis block;
// block 0 itself is not stable on a devnet: anvil makes it again whenever it loads saved state), USDC and batcher. Recorded
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
  /** Block 1, or 0 on a chain that had no block 1 when it was recorded. */
  readonly anchorBlock: number
  readonly anchorHash: string
  readonly usdc: string
  readonly batcher: string | null
}

/** What a start does about one network: record it, complete its record (a batcher set later), or nothing. */
export type IdentityStep =
  | { readonly _tag: "Record" }
  | { readonly _tag: "SetBatcher" }
  | { readonly _tag: "Same" }
  | { readonly _tag: "Mismatch"; readonly what: string }

const anchor = (i: ChainIdentity) => `${i.anchorBlock === 0 ? "genesis" : `block ${i.anchorBlock}`} ${i.anchorHash}`
const describe = (i: ChainIdentity) =>
  `chain id ${i.chainId}, ${anchor(i)}, USDC ${i.usdc}${i.batcher === null ? "" : `, batcher ${i.batcher}`}`

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
    ...(same.anchorBlock !== current.anchorBlock || same.anchorHash !== current.anchorHash ? [anchor(current)] : []),
    ...(same.usdc.toLowerCase() !== current.usdc.toLowerCase() ? [`USDC ${current.usdc}`] : []),
    ...(same.batcher !== null && same.batcher.toLowerCase() !== (current.batcher ?? "").toLowerCase() ? [`batcher ${current.batcher ?? "none"}`] : [])
  ]
  if (differences.length > 0) {
    return { _tag: "Mismatch", what: `network "${same.network}" is ${describe(same)}, but the chain now has ${differences.join(", ")}` }
  }
  return same.batcher === null && current.batcher !== null ? { _tag: "SetBatcher" } : { _tag: "Same" }
}

/**
 * A network's identity as its RPC reports it, at `anchorBlock` (the recorded one; for a first record block 1, or 0 on
 * a chain without block 1). A chain shorter than the recorded anchor has "none" there: another chain.
 */
export const identityOf = (chain: ChainShape, primary: boolean, anchorBlock: number | undefined) =>
  Effect.gen(function* () {
    const rpcFailed = (error: unknown) =>
      new ChainIdentityError({ message: `chain RPC ${chain.rpcUrl} did not answer: ${String(error).split("\n")[0]}` })
    const height = yield* Effect.tryPromise({ try: () => chain.publicClient.getBlockNumber({ cacheTime: 0 }), catch: rpcFailed })
    const block = anchorBlock ?? (height >= 1n ? 1 : 0)
    const hash = BigInt(block) > height ? "none" : (yield* Effect.tryPromise({
      try: () => chain.publicClient.getBlock({ blockNumber: BigInt(block) }),
      catch: rpcFailed
    })).hash
    return {
      network: chain.network,
      primary,
      chainId: chain.chainId,
      anchorBlock: block,
      anchorHash: hash,
      usdc: chain.usdc.address,
      batcher: Option.getOrNull(chain.batcher)
    } satisfies ChainIdentity
  })

const isHex = (text: string): text is `0x${string}` => /^0x[0-9a-fA-F]+$/.test(text)

interface IdentityRow {
  readonly network: string
  readonly isPrimary: boolean
  readonly chainId: string
  readonly anchorBlock: string
  readonly anchorHash: string
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
    if (hash === undefined || !isHex(hash)) return Option.none<string>()
    const receipt = yield* Effect.tryPromise({
      try: () => chain.publicClient.request({ method: "eth_getTransactionReceipt", params: [hash] }),
      catch: (error) => new ChainIdentityError({ message: `chain RPC ${chain.rpcUrl} did not answer: ${String(error).split("\n")[0]}` })
    })
    return receipt === null ? Option.some(`its confirmed treasury transaction ${hash} is not on the chain at ${chain.rpcUrl}`) : Option.none<string>()
  })

/** Compares (and records) every network's identity; fails with one line naming the mismatch and `advice`. */
export const checkChainIdentities = (networks: ReadonlyArray<ChainShape>, advice: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<IdentityRow>`
      SELECT network, is_primary, chain_id, anchor_block, anchor_hash, usdc_address, batcher_address FROM chain_identities`
    const recorded = rows.map((r): ChainIdentity => ({
      network: r.network,
      primary: r.isPrimary,
      chainId: Number(r.chainId),
      anchorBlock: Number(r.anchorBlock),
      anchorHash: r.anchorHash,
      usdc: r.usdcAddress,
      batcher: r.batcherAddress
    }))
    const current = yield* Effect.forEach(
      networks,
      (chain, i) => identityOf(chain, i === 0, recorded.find((r) => r.network === chain.network)?.anchorBlock),
      { concurrency: "unbounded" }
    )
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
            anchorBlock: identity.anchorBlock,
            anchorHash: identity.anchorHash,
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
export const adviceFor = (mode: "devnet" | "rpc", db: DatabaseInfo, dataDir: string): string => {
  if (mode === "devnet" && db.mode === "embedded") {
    const link = path.join(path.resolve(dataDir), "postgres")
    const where = db.dataDir !== undefined && db.dataDir !== link ? `${link} (the database, kept in ${db.dataDir})` : link
    return `To start over on this devnet, stop the service and delete ${where}, or all of DATA_DIR ${path.resolve(dataDir)} to start the chain over too`
  }
  if (mode === "devnet") return "To start over on this devnet, give it a fresh database (a new, empty DATABASE_URL)"
  return "Point the RPC setting at the chain this database belongs to, or give this chain a new, empty database (DATABASE_URL)"
}

/** The check as a start runs it: the given networks (the primary first), with the advice for this way of running. */
export const checkAtStart = (networks: ReadonlyArray<ChainShape>) =>
  Effect.gen(function* () {
    const db = yield* DatabaseInfo
    const config = yield* AppConfig
    const mode = networks[0]?.mode ?? "rpc"
    const check: Effect.Effect<void, ChainIdentityError | SqlError, SqlClient.SqlClient> =
      checkChainIdentities(networks, adviceFor(mode, db, config.dataDir))
    yield* Redacted.value(db.url) === "" ? check : check.pipe(withStartupLock(db.url))
  })

/** At start, before any service: every configured network against the database's record, under the start-up lock. */
export const ChainIdentityLive = Layer.effectDiscard(Effect.flatMap(Networks, (networks) => checkAtStart(networks.all)))
