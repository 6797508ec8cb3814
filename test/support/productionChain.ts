// A chain as an operator meets it in production, on this machine: an anvil of the test's own (automine, or blocks
// every N seconds), a USDC token deployed for the run by a fresh key, payers funded with it, the SettlementBatcher
// deployed by our deploy command, and a freshly generated treasury key with gas. No anvil dev key signs anything.
import { Effect, Layer, Option } from "effect"
import { createPublicClient, createTestClient, createWalletClient, type Hex, http, parseEther } from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { deployBatcher } from "../../layers/batcherDeploy.js"
import { Chain, connectChain } from "../../layers/Chain.js"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { spawnAnvil } from "../../layers/devnet/process.js"
import { shippedTestUsdc } from "../../layers/devnet/testUsdc.generated.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"

export interface ProductionChain {
  readonly rpcUrl: string
  readonly usdc: Hex
  readonly batcher: Hex
  readonly treasuryKey: Hex
  readonly treasury: Hex
  /** Fresh accounts holding 1,000 USDC each (and no ETH: x402 payers only sign). */
  readonly payers: ReadonlyArray<PrivateKeyAccount>
  readonly balanceOf: (address: Hex) => Promise<bigint>
}

const USDC_EACH = 1_000_000_000n

/**
 * On the chain at `rpcUrl` (funding accounts with anvil_setBalance): the token deployed by a fresh key, `payers` fresh
 * accounts holding 1,000 USDC each, the batcher deployed by our deploy command and a fresh treasury key with gas.
 */
export const deployProductionChain = async (rpcUrl: string, options: { readonly payers?: number } = {}): Promise<ProductionChain> => {
  const chain = devnetChain(rpcUrl)
  const transport = http(rpcUrl)
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 })
  const gas = createTestClient({ mode: "anvil", chain, transport })
  const withGas = async () => {
    const key = generatePrivateKey()
    await gas.setBalance({ address: privateKeyToAccount(key).address, value: parseEther("10") })
    return key
  }
  const issuer = createWalletClient({ account: privateKeyToAccount(await withGas()), chain, transport, pollingInterval: 50 })
  const deployed = await publicClient.waitForTransactionReceipt({
    hash: await issuer.sendTransaction({ data: shippedTestUsdc.bytecode, gas: 3_000_000n }),
    timeout: 60_000
  })
  const usdc = deployed.contractAddress
  if (deployed.status !== "success" || usdc === null || usdc === undefined) throw new Error("the USDC deployment failed")
  const payers = Array.from({ length: options.payers ?? 6 }, () => privateKeyToAccount(generatePrivateKey()))
  // One mint after the other: the issuer's nonces stay in order whatever the block time.
  for (const payer of payers) {
    const hash = await issuer.writeContract({ address: usdc, abi: usdcAbi, functionName: "mint", args: [payer.address, USDC_EACH], gas: 200_000n })
    await publicClient.waitForTransactionReceipt({ hash, timeout: 60_000 })
  }
  const { address: batcher } = await deployBatcher({ rpcUrl, privateKey: await withGas(), pollingIntervalMs: 50 })
  const treasuryKey = await withGas()
  return {
    rpcUrl,
    usdc,
    batcher,
    treasuryKey,
    treasury: privateKeyToAccount(treasuryKey).address,
    payers,
    balanceOf: (address) => publicClient.readContract({ address: usdc, abi: usdcAbi, functionName: "balanceOf", args: [address] })
  }
}

export const productionChain = (options: { readonly blockTime?: number; readonly payers?: number } = {}) =>
  Effect.acquireRelease(
    Effect.promise(() => spawnAnvil({ port: 0, ...(options.blockTime === undefined ? {} : { blockTime: options.blockTime }) })),
    (anvil) => Effect.promise(() => anvil.stop())
  ).pipe(Effect.flatMap((anvil) => Effect.promise(() => deployProductionChain(anvil.rpcUrl, options))))

/**
 * The service's chain on `own`'s token, batcher and treasury key, reached at `rpcUrl` (the anvil, or a proxy before it);
 * `confirmations` defaults to the mode's (1 on a devnet, the chain id's on an RPC).
 */
export const chainOn = (own: ProductionChain, mode: "devnet" | "rpc", rpcUrl: string = own.rpcUrl, confirmations?: number) =>
  Layer.effect(Chain, connectChain({
    mode,
    rpcUrl,
    usdcAddress: own.usdc,
    signerKey: Option.some(own.treasuryKey),
    treasuryAddress: Option.none(),
    batcherAddress: Option.some(own.batcher),
    ...(confirmations === undefined ? {} : { confirmations })
  }))
