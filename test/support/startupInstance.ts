// One instance's start-up schema work as its own process (for test/integration/startupConcurrency.test.ts): for each
// database URL read on stdin, the real start code (PgLive: connection pool, migrations under the start-up lock; then the
// chain-identity check) is built and released, and one line `RESULT ok` or `RESULT fail <message>` is written.
import { ConfigProvider, Effect, Exit, Layer, Option, Scope } from "effect"
import * as readline from "node:readline"
import { Chain, connectChain } from "../../layers/Chain.js"
import { ChainIdentityLive } from "../../layers/chainIdentity.js"
import { ConfigLive } from "../../layers/Config.js"
import { DEV_PRIVATE_KEYS } from "../../layers/devnet/accounts.js"
import { PrimaryOnlyLive } from "../../layers/Networks.js"
import { PgLive } from "../../layers/Pg.js"
import { describeStartupFailure } from "../../src/startupFailure.js"

const isAddress = (text: string | undefined): text is `0x${string}` => text !== undefined && /^0x[0-9a-fA-F]{40}$/.test(text)
const [rpcUrl, usdcAddress] = process.argv.slice(2)
if (rpcUrl === undefined || !isAddress(usdcAddress)) {
  console.error("usage: startupInstance.ts <rpcUrl> <usdcAddress>")
  process.exit(2)
}

/** The run's devnet, kept connected for the life of the process. */
const chainScope = Effect.runSync(Scope.make())
const chain = await Effect.runPromise(
  connectChain({
    mode: "devnet",
    rpcUrl,
    usdcAddress,
    signerKey: Option.fromNullable(DEV_PRIVATE_KEYS[0]),
    treasuryAddress: Option.none()
  }).pipe(Scope.extend(chainScope))
)

const startOn = (databaseUrl: string) => {
  const provider = ConfigProvider.fromMap(new Map([["DATABASE_URL", databaseUrl], ["DATA_DIR", "/nonexistent"], ["DATABASE_POOL_SIZE", "4"]]))
  const start = Layer.provideMerge(ChainIdentityLive, PrimaryOnlyLive).pipe(
    Layer.provideMerge(Layer.merge(PgLive, Layer.succeed(Chain, chain))),
    Layer.provide(ConfigLive),
    Layer.provide(Layer.setConfigProvider(provider))
  )
  return Effect.scoped(Layer.build(start))
}

const lines = readline.createInterface({ input: process.stdin })
process.stdout.write("RESULT ready\n")
for await (const line of lines) {
  const url = line.trim()
  if (url === "") continue
  const exit = await Effect.runPromiseExit(startOn(url))
  const message = Exit.isSuccess(exit) ? "ok" : `fail ${describeStartupFailure(exit.cause, "0")}`
  process.stdout.write(`RESULT ${message}\n`)
}
