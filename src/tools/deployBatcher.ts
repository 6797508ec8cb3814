// `npm run deploy:batcher -- --rpc URL [--confirmations N]`: deploys (or finds) the shipped SettlementBatcher and prints
// the setting to paste. The key comes from DEPLOYER_PRIVATE_KEY (or TREASURY_PRIVATE_KEY), never from the command line.
import { parseArgs } from "node:util"
import { BatcherDeployError, deployBatcher } from "../../layers/batcherDeploy.js"

const usage = "usage: npm run deploy:batcher -- --rpc URL [--confirmations N]   (key in DEPLOYER_PRIVATE_KEY or TREASURY_PRIVATE_KEY)"

const isKey = (s: string): s is `0x${string}` => /^0x[0-9a-fA-F]{64}$/.test(s)

const fail = (message: string): never => {
  console.error(`deploy:batcher: ${message}`)
  process.exit(1)
}

const main = async () => {
  const { values } = parseArgs({
    options: { rpc: { type: "string" }, confirmations: { type: "string" }, help: { type: "boolean", short: "h" } },
    strict: true
  })
  if (values.help === true) {
    console.log(usage)
    return
  }
  const rpcUrl = values.rpc ?? process.env["CHAIN_RPC_URL"] ?? fail(`--rpc is required\n${usage}`)
  const key = (process.env["DEPLOYER_PRIVATE_KEY"] ?? process.env["TREASURY_PRIVATE_KEY"] ?? fail(`no key: set DEPLOYER_PRIVATE_KEY\n${usage}`)).trim()
  if (!isKey(key)) return fail("the key must be 0x followed by 64 hex digits")
  const confirmations = values.confirmations === undefined ? undefined : Number(values.confirmations)
  if (confirmations !== undefined && !(Number.isInteger(confirmations) && confirmations >= 1 && confirmations <= 64)) {
    fail("--confirmations must be an integer from 1 to 64")
  }
  const result = await deployBatcher({
    rpcUrl,
    privateKey: key,
    ...(confirmations === undefined ? {} : { confirmations }),
    log: (line) => console.error(line)
  })
  // stdout carries only the settings, so `npm run -s deploy:batcher -- --rpc … >> .env` works.
  console.log(`SETTLEMENT_BATCHER_ADDRESS=${result.address}`)
}

main().catch((error: unknown) => {
  fail(error instanceof BatcherDeployError ? error.message : `failed: ${error instanceof Error ? error.message : String(error)}`)
})
