// `npm run deploy:channels -- --rpc URL [--replace]`: places our own implementations of x402's batch-settlement and
// upto contracts at their canonical addresses on a local anvil (anvil_setCode). Refuses any chain that is not an anvil.
// `--replace` also overwrites code at those addresses that is not ours (by default it is left alone and reported).
import { parseArgs } from "node:util"
import { ChannelDeployError, deployChannels } from "../../layers/devnet/channels/place.js"

const usage = "usage: npm run deploy:channels -- --rpc URL [--replace]   (a local anvil only)"

const fail = (message: string): never => {
  console.error(`deploy:channels: ${message}`)
  process.exit(1)
}

const main = async () => {
  const { values } = parseArgs({
    options: { rpc: { type: "string" }, replace: { type: "boolean" }, help: { type: "boolean", short: "h" } },
    strict: true
  })
  if (values.help === true) {
    console.log(usage)
    return
  }
  const rpcUrl = values.rpc ?? process.env["CHAIN_RPC_URL"] ?? fail(`--rpc is required\n${usage}`)
  const placed = await deployChannels(rpcUrl, { replaceForeign: values.replace === true, log: (line) => console.log(line) })
  const foreign = placed.filter((p) => p.outcome === "foreign")
  if (foreign.length > 0) {
    fail(`other code is at ${foreign.map((p) => `${p.name} ${p.address}`).join(", ")}; left alone (--replace overwrites it)`)
  }
}

main().catch((error: unknown) => {
  fail(error instanceof ChannelDeployError ? error.message : `failed: ${error instanceof Error ? error.message : String(error)}`)
})
