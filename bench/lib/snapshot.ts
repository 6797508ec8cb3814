// Chain snapshots for the benches: every paid phase starts from the same evm_snapshot, with the service's database copied
// at the same moment (so nonces, payments and ledger describe the chain they talk to).
import pg from "pg"
import { at, BenchError } from "./params.js"

// ---------------------------------------------------------------------------------------------------------------
// chain snapshots: anvil's cost per block grows with the state it holds (every payment leaves a used-authorization
// slot in the token's storage), so every paid phase starts from the same snapshot, taken right after set-up

export const rpcCall = async (rpcUrl: string, method: string, params: ReadonlyArray<unknown> = []): Promise<unknown> => {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(30_000)
  })
  const body: unknown = await response.json()
  const error = at(body, "error")
  if (error !== undefined) throw new BenchError(`${method} failed: ${JSON.stringify(error)}`)
  return at(body, "result")
}

export const blockNumber = async (rpcUrl: string) => Number(BigInt(String(await rpcCall(rpcUrl, "eth_blockNumber"))))

/** A database kept in step with a chain snapshot: the service's nonces, payments and ledger describe that chain. */
interface DbSnapshot {
  readonly adminUrl: string
  readonly database: string
  readonly copy: string
}

export const adminQuery = async (adminUrl: string, text: string) => {
  const client = new pg.Client(adminUrl)
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

export class ChainSnapshot {
  private constructor(private readonly rpcUrl: string, private id: unknown, private readonly db: DbSnapshot | undefined) {}

  /**
   * `evm_snapshot`, and (with `infra`) a copy of the service's database taken at the same moment (no service may be
   * running): reverting the chain under a database that remembers later transactions (treasury nonces, settled
   * payments) would leave the service out of step with the chain it talks to.
   */
  static async take(rpcUrl: string, infra?: { readonly databaseUrl: string }) {
    const id = await rpcCall(rpcUrl, "evm_snapshot")
    if (infra === undefined) return new ChainSnapshot(rpcUrl, id, undefined)
    const url = new URL(infra.databaseUrl)
    const database = url.pathname.slice(1)
    url.pathname = "/postgres"
    const db = { adminUrl: url.toString(), database, copy: `${database}_snapshot` }
    await adminQuery(db.adminUrl, `DROP DATABASE IF EXISTS ${db.copy}`)
    await adminQuery(db.adminUrl, `CREATE DATABASE ${db.copy} TEMPLATE ${db.database}`)
    return new ChainSnapshot(rpcUrl, id, db)
  }

  /** Back to the snapshot (anvil drops it on revert, so a new one is taken at once), the database too. */
  async restore() {
    if ((await rpcCall(this.rpcUrl, "evm_revert", [this.id])) !== true) throw new BenchError("evm_revert refused the snapshot")
    this.id = await rpcCall(this.rpcUrl, "evm_snapshot")
    if (this.db !== undefined) {
      await adminQuery(this.db.adminUrl, `DROP DATABASE IF EXISTS ${this.db.database} WITH (FORCE)`)
      await adminQuery(this.db.adminUrl, `CREATE DATABASE ${this.db.database} TEMPLATE ${this.db.copy}`)
    }
  }
}
