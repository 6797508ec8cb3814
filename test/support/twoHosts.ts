// Two instances of the service as an operator scales out: each the start script (its own supervisor and data
// directory) in production mode on one PostgreSQL and one chain (an anvil of the test's own with its token, batcher and
// a fresh treasury key), with one set of secrets, behind a plain round-robin balancer (TRUST_PROXY=true, the balancer's
// URL as PUBLIC_BASE_URL). Clients talk to `url`; a test reaches one instance directly through `hosts`.
import { Effect } from "effect"
import { generateKeyPairSync } from "node:crypto"
import pg from "pg"
import { type Balancer, balancer } from "./balancer.js"
import { freshDatabase } from "./harness.js"
import { pgConnection, tempDataDir } from "./processes.js"
import { type ProductionChain, productionChain } from "./productionChain.js"
import { ensureBundle, type ServerProcess, serverProcess } from "./servers.js"

export const TWO_HOSTS_OPERATOR_TOKEN = "two-hosts-operator-token-0123456789abcdef"
export const TWO_HOSTS_OPERATOR = { authorization: `Bearer ${TWO_HOSTS_OPERATOR_TOKEN}`, "x-operator": "two-hosts test" }

export interface TwoHosts {
  /** The balancer's URL: where clients go. */
  readonly url: string
  readonly balancer: Balancer
  readonly hosts: readonly [ServerProcess, ServerProcess]
  readonly chain: ProductionChain
  /** A direct connection to the instances' database. */
  readonly query: <R extends pg.QueryResultRow>(text: string, values?: ReadonlyArray<unknown>) => Promise<Array<R>>
}

/** The secrets every instance shares (the same values on each, as an operator deploys them). */
const sharedSecrets = () => ({
  OPERATOR_TOKEN: TWO_HOSTS_OPERATOR_TOKEN,
  PROXY_SIGNING_KEY: generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
  CLIENT_ID_SECRET: "two-hosts-client-id-secret-0123456789abcdef",
  WEBHOOK_SECRET_KEY: "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
  CHAIN_TOKEN_SECRET: "two-hosts-chain-token-secret-0123456789abcdef"
})

/**
 * Two healthy instances behind a balancer, stopped with the scope (SIGKILL: nothing of theirs survives the test).
 * `settings` apply to both; `payers` fresh accounts hold 1,000 USDC each.
 */
export const twoHosts = (options: { readonly settings?: Record<string, string>; readonly payers?: number } = {}) =>
  Effect.gen(function* () {
    yield* Effect.promise(ensureBundle)
    const chain = yield* productionChain({ payers: options.payers ?? 6 })
    const db = yield* freshDatabase
    const front = yield* balancer
    const client = yield* pgConnection(db.url)
    const shared = {
      DATABASE_URL: db.url,
      CHAIN_RPC_URL: chain.rpcUrl,
      USDC_ADDRESS: chain.usdc,
      TREASURY_PRIVATE_KEY: chain.treasuryKey,
      SETTLEMENT_BATCHER_ADDRESS: chain.batcher,
      PUBLIC_BASE_URL: front.url,
      TRUST_PROXY: "true",
      ...sharedSecrets(),
      // The test's agents and receivers listen on loopback.
      ALLOW_PRIVATE_URLS: "true",
      // Every client of the test comes from 127.0.0.1.
      RATE_LIMIT_CLIENT_PER_WINDOW: "1000",
      LOG_LEVEL: "warn",
      ...options.settings
    }
    const host = Effect.flatMap(tempDataDir("marketplace-host-"), (dataDir) => serverProcess({ ...shared, DATA_DIR: dataDir }))
    // The template database is migrated already, so the two start side by side as after a deploy.
    const [a, b] = yield* Effect.all([host, host], { concurrency: 2 })
    front.setUpstreams([a.baseUrl, b.baseUrl])
    const query = <R extends pg.QueryResultRow>(text: string, values: ReadonlyArray<unknown> = []) =>
      client.query<R>(text, [...values]).then((r) => r.rows)
    const hosts: TwoHosts = { url: front.url, balancer: front, hosts: [a, b], chain, query }
    return hosts
  })
