/**
 * Deploying the shipped SettlementBatcher on a real chain: through the deterministic CREATE2 deployment proxy, so the
 * batcher's address depends only on its bytecode and our salt (the same on every chain, whoever deploys it), and a
 * second run finds the first deployment instead of paying for another.
 */
import {
  concat,
  createPublicClient,
  createWalletClient,
  type Chain as ViemChain,
  defineChain,
  getContractAddress,
  type Hex,
  http,
  keccak256,
  toBytes
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { DEV_ACCOUNTS } from "./devnet/accounts.js"
import { shippedSettlementBatcher } from "./devnet/settlementBatcher.generated.js"

/**
 * The deterministic deployment proxy (Arachnid's): deployed at this address on Ethereum, Base, Base Sepolia and most
 * EVM chains, and by anvil at start. Its calldata is `salt ‖ initcode`; it deploys with CREATE2 and returns the address.
 */
export const CREATE2_PROXY: Hex = "0x4e59b44847b379578588920ca78fbf26c0b4956c"

/** Versioned: a changed contract gets a new address, never a silent replacement at the old one. */
export const BATCHER_SALT: Hex = keccak256(toBytes("agent-marketplace SettlementBatcher v1"))

/** Where the shipped batcher lands when deployed through the proxy (any chain, any deployer). */
export const batcherAddressFor = (initcode: Hex = shippedSettlementBatcher.bytecode): Hex =>
  getContractAddress({ opcode: "CREATE2", from: CREATE2_PROXY, salt: BATCHER_SALT, bytecode: initcode })

/**
 * Blocks to wait on top of the deployment's own block, by chain id, unless `--confirmations` says otherwise. A deploy
 * lost to a reorg is harmless (the next run deploys again at the same address), so this is about not printing an
 * address that is not there yet, not about money.
 */
const CONFIRMATIONS: Readonly<Record<number, number>> = { 1: 3, 8453: 3, 84532: 2, 11155111: 2 }

export interface DeployOptions {
  readonly rpcUrl: string
  readonly privateKey: Hex
  readonly confirmations?: number
  readonly log?: (line: string) => void
  /** Receipt polling (viem's default is seconds; 20 ms suits a local anvil). */
  readonly pollingIntervalMs?: number
}

export interface DeployResult {
  readonly address: Hex
  readonly chainId: number
  /** The deployment's transaction, or undefined when the batcher was already there. */
  readonly transactionHash: Hex | undefined
}

export class BatcherDeployError extends Error {
  override readonly name = "BatcherDeployError"
}

const isDevKey = (key: Hex) => DEV_ACCOUNTS.some((account) => account.privateKey.toLowerCase() === key.toLowerCase())

/** Finds the batcher at its deterministic address, or deploys it there; either way checks the code is ours. */
export const deployBatcher = async (options: DeployOptions): Promise<DeployResult> => {
  const log = options.log ?? (() => {})
  const transport = http(options.rpcUrl, { timeout: 30_000, retryCount: 3 })
  const probe = createPublicClient({ transport })
  const [chainId, client] = await Promise.all([
    probe.getChainId(),
    probe.request({ method: "web3_clientVersion" }).catch(() => "unknown")
  ])
  const local = typeof client === "string" && client.toLowerCase().startsWith("anvil")
  if (isDevKey(options.privateKey) && !local) {
    throw new BatcherDeployError("the deployer key is a well-known anvil dev key; refusing to use it outside a local anvil")
  }
  const chain: ViemChain = defineChain({
    id: chainId,
    name: `chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [options.rpcUrl] } }
  })
  const pollingInterval = options.pollingIntervalMs ?? (local ? 20 : 2_000)
  const publicClient = createPublicClient({ chain, transport, pollingInterval })
  const initcode = shippedSettlementBatcher.bytecode
  const address = batcherAddressFor(initcode)
  // What the constructor leaves at the address: the proof that the code there is the shipped batcher.
  const runtime = (await publicClient.call({ data: initcode })).data
  if (runtime === undefined || runtime === "0x") throw new BatcherDeployError("the shipped initcode returned no runtime code")
  const verify = async () => {
    const code = await publicClient.getCode({ address })
    if (code === undefined || code === "0x") return false
    if (code.toLowerCase() !== runtime.toLowerCase()) {
      throw new BatcherDeployError(`${address} holds code that is not the shipped SettlementBatcher`)
    }
    return true
  }
  log(`chain ${chainId} (${local ? "local anvil" : String(client)}), batcher address ${address}`)
  if (await verify()) {
    log("already deployed: nothing sent")
    return { address, chainId, transactionHash: undefined }
  }
  const proxyCode = await publicClient.getCode({ address: CREATE2_PROXY })
  if (proxyCode === undefined || proxyCode === "0x") {
    throw new BatcherDeployError(`the deterministic deployment proxy ${CREATE2_PROXY} is not deployed on chain ${chainId}`)
  }
  const account = privateKeyToAccount(options.privateKey)
  const wallet = createWalletClient({ account, chain, transport, pollingInterval })
  const data = concat([BATCHER_SALT, initcode])
  // Fees come from the chain (viem: base fee and priority fee estimates); gas from a simulation of the proxy call.
  const gas = await publicClient.estimateGas({ account, to: CREATE2_PROXY, data })
  log(`deploying from ${account.address} (gas ${gas})`)
  const hash = await wallet.sendTransaction({ to: CREATE2_PROXY, data, gas: (gas * 12n) / 10n })
  log(`sent ${hash}`)
  const confirmations = options.confirmations ?? (local ? 1 : CONFIRMATIONS[chainId] ?? 3)
  const receipt = await publicClient.waitForTransactionReceipt({ hash, confirmations, timeout: 15 * 60_000 })
  if (receipt.status !== "success") throw new BatcherDeployError(`the deployment ${hash} reverted`)
  if (!(await verify())) throw new BatcherDeployError(`the deployment ${hash} was mined but ${address} has no code`)
  log(`deployed in block ${receipt.blockNumber}, ${confirmations} confirmation(s)`)
  return { address, chainId, transactionHash: hash }
}
