// The chain we take payments on: a devnet (anvil + our test USDC) when CHAIN_RPC_URL is unset, any EVM RPC otherwise.
import { Config, Context, Data, Effect, Layer, Option, Redacted } from "effect"
import * as path from "node:path"
import {
  type Account,
  type Chain as ViemChain,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  createNonceManager,
  type PublicClient,
  type Transport,
  type WalletClient
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { jsonRpc } from "viem/nonce"
import { AppConfig } from "./Config.js"
import { treasuryAccount } from "./nativeAccount.js"
import { batchClient, boundedTransport, pollingIntervalFor, RPC_DEFAULT_TIMEOUT_MS } from "./chainTransport.js"
import type { RpcBatch } from "./rpcBatch.js"
import { readConfirmations } from "./confirmations.js"
import { DEV_PRIVATE_KEYS, DEVNET_SETTLEMENT_BATCHER_ADDRESS, DEVNET_USDC_ADDRESS, devnetChain, startDevnet } from "./devnet/anvil.js"
import { usdcAbi } from "./devnet/usdcAbi.js"
import { OTHER_NETWORKS, X402_NETWORKS } from "./x402/networks.js"

export class ChainStartError extends Data.TaggedError("ChainStartError")<{ readonly message: string }> {}


export interface ChainShape {
  readonly mode: "devnet" | "rpc"
  readonly rpcUrl: string
  readonly chainId: number
  /**
   * The network's name ("base-sepolia" in devnet; "ethereum" for chain id 1, which x402 v1 does not name): what payment
   * rows, settlement batches and treasury transactions record as their `network`.
   */
  readonly network: string
  /** The token and its EIP-712 domain, read from the contract at start. */
  readonly usdc: { readonly address: `0x${string}`; readonly name: string; readonly version: string }
  /** Where payments go (x402 `payTo`). */
  readonly treasury: `0x${string}`
  readonly publicClient: PublicClient<Transport, ViemChain>
  /**
   * Several calls as one JSON-RPC batch in one request, under the transport's bounds (layers/rpcBatch.ts): the paid
   * call's hot reads. Rejects with `BatchRefused` when the provider does not take batches (then read through viem).
   */
  readonly rpcBatch: RpcBatch["batch"]
  /**
   * Who settles incoming payments: our treasury key ("local": treasury transactions, batched) or an x402 facilitator's
   * `/settle` ("facilitator", FACILITATOR_URL). Payouts (refunds, withdrawals, dispute payouts, chain remainders) are
   * always signed by the treasury key, in both modes.
   */
  readonly settlement: "local" | "facilitator"
  /** The treasury key: it signs payouts always, and settlements when `settlement` is "local". */
  readonly signer: Option.Option<{ readonly account: Account; readonly walletClient: WalletClient<Transport, ViemChain, Account> }>
  /**
   * The SettlementBatcher that settles many payments in one transaction (contracts/SettlementBatcher.sol): the devnet's
   * own, or SETTLEMENT_BATCHER_ADDRESS on a real chain; absent → one transaction per payment (and with a facilitator).
   */
  readonly batcher: Option.Option<`0x${string}`>
  /**
   * Blocks before a treasury transaction is final (CHAIN_CONFIRMATIONS, default per chain: layers/confirmations.ts).
   * Bookings happen at inclusion; the reconciliation compares at the last final block; a transaction reorged out
   * before it is final is sent again (services/treasury/Finality.ts).
   */
  readonly confirmations: number
  /** Devnet only: the dev accounts, for the banner and tests. */
  readonly devAccounts: ReadonlyArray<{ readonly address: `0x${string}`; readonly privateKey: `0x${string}` }>
}

export class Chain extends Context.Tag("Chain")<Chain, ChainShape>() {}

/** Builds the Chain service for an RPC endpoint; `devnet` allows the well-known dev keys. */
export const connectChain = (options: {
  readonly mode: "devnet" | "rpc"
  readonly rpcUrl: string
  readonly usdcAddress: `0x${string}`
  readonly signerKey: Option.Option<`0x${string}`>
  readonly treasuryAddress: Option.Option<`0x${string}`>
  /** Default "local". */
  readonly settlement?: "local" | "facilitator"
  readonly devAccounts?: ChainShape["devAccounts"]
  readonly network?: string
  /** Default: the devnet's batcher in devnet mode (when deployed), none on an RPC. */
  readonly batcherAddress?: Option.Option<`0x${string}`>
  /** Each try of an RPC call (rpc mode); default RPC_DEFAULT_TIMEOUT_MS. */
  readonly rpcTimeoutMs?: number
  /** Default: CHAIN_CONFIRMATIONS, else the chain's default (1 on a devnet). */
  readonly confirmations?: number
}) =>
  Effect.gen(function* () {
    // One transport (one connection pool) for the probe and the clients.
    const transport = boundedTransport(options.mode, options.rpcUrl, options.rpcTimeoutMs)
    const probe = createPublicClient({ transport })
    const chainId = yield* Effect.tryPromise({
      try: () => probe.getChainId(),
      catch: (error) => new ChainStartError({ message: `chain RPC ${options.rpcUrl} did not answer: ${String(error)}` })
    })
    const chain = options.mode === "devnet"
      ? devnetChain(options.rpcUrl, chainId)
      : defineChain({
        id: chainId,
        name: `chain-${chainId}`,
        nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
        rpcUrls: { default: { http: [options.rpcUrl] } }
      })
    const network = options.network ?? X402_NETWORKS[chainId] ?? OTHER_NETWORKS[chainId]
    if (network === undefined) {
      return yield* new ChainStartError({
        message: `chain RPC ${options.rpcUrl} serves chain id ${chainId}, which has no x402 v1 network name: use a supported chain or set X402_NETWORK`
      })
    }
    const named = Object.entries({ ...X402_NETWORKS, ...OTHER_NETWORKS }).find(([, name]) => name === network)
    if (named !== undefined && Number(named[0]) !== chainId) {
      return yield* new ChainStartError({
        message: `chain RPC ${options.rpcUrl} serves chain id ${chainId}, but x402 network "${network}" is chain id ${named[0]}: wrong chain`
      })
    }
    const pollingInterval = pollingIntervalFor(options.mode)
    const publicClient = createPublicClient({ chain, transport, pollingInterval })
    const [name, version] = yield* Effect.tryPromise({
      try: () =>
        Promise.all([
          publicClient.readContract({ address: options.usdcAddress, abi: usdcAbi, functionName: "name" }),
          publicClient.readContract({ address: options.usdcAddress, abi: usdcAbi, functionName: "version" })
        ]),
      catch: (error) =>
        new ChainStartError({ message: `USDC at ${options.usdcAddress} did not answer name()/version(): ${String(error)}` })
    })
    const signer = Option.map(options.signerKey, (key) => {
      // The nonce manager hands out signer nonces locally, so concurrent settlements do not collide.
      // One per connection: viem's shared manager would remember nonces of a previous chain in this process.
      const account = treasuryAccount(key, { nonceManager: createNonceManager({ source: jsonRpc() }) })
      const walletClient = createWalletClient({ account, chain, transport, pollingInterval })
      return { account, walletClient }
    })
    const treasury = Option.match(signer, {
      onSome: (s) => s.account.address,
      onNone: () => Option.getOrThrow(options.treasuryAddress)
    })
    const settlement = options.settlement ?? "local"
    // A facilitator settles one payment per call: the batcher is only ours to use when our key settles.
    const batcher = yield* batcherAt(publicClient, Option.isNone(signer) || settlement === "facilitator" ? Option.none() : options.batcherAddress ?? (
      options.mode === "devnet" ? Option.some(DEVNET_SETTLEMENT_BATCHER_ADDRESS) : Option.none()
    ), options.batcherAddress === undefined)
    return {
      mode: options.mode,
      rpcUrl: options.rpcUrl,
      chainId,
      network,
      usdc: { address: getAddress(options.usdcAddress), name, version },
      treasury: getAddress(treasury),
      publicClient,
      rpcBatch: batchClient(options.mode, options.rpcUrl, options.rpcTimeoutMs).batch,
      settlement,
      signer,
      batcher,
      confirmations: options.confirmations ?? (yield* readConfirmations(options.mode, chainId).pipe(
        Effect.mapError((e) => new ChainStartError({ message: String(e) }))
      )),
      devAccounts: options.devAccounts ?? []
    } satisfies ChainShape
  })

/**
 * The batcher, if it has code: a configured address without code refuses the start; the devnet's default without code
 * (an older devnet state) means one transaction per payment.
 */
const batcherAt = (publicClient: PublicClient<Transport, ViemChain>, address: Option.Option<`0x${string}`>, isDefault: boolean) =>
  Effect.gen(function* () {
    if (Option.isNone(address)) return Option.none<`0x${string}`>()
    const code = yield* Effect.tryPromise({
      try: () => publicClient.getCode({ address: address.value }),
      catch: (error) => new ChainStartError({ message: `the settlement batcher at ${address.value} could not be read: ${String(error)}` })
    })
    if (code !== undefined && code !== "0x") return Option.some(getAddress(address.value))
    if (isDefault) return Option.none<`0x${string}`>()
    return yield* new ChainStartError({ message: `SETTLEMENT_BATCHER_ADDRESS ${address.value} has no contract code on this chain` })
  })

const devnetPort = Config.integer("DEVNET_PORT").pipe(Config.withDefault(8545))

/** Devnet against an anvil somebody else runs (benchmarks, several service processes on one devnet). */
const attachedDevnet = (rpcUrl: string) =>
  connectChain({
    mode: "devnet",
    rpcUrl,
    usdcAddress: DEVNET_USDC_ADDRESS,
    signerKey: Option.fromNullable(DEV_PRIVATE_KEYS[0]),
    treasuryAddress: Option.none()
  })

const devnet = Effect.gen(function* () {
  const config = yield* AppConfig
  const attach = yield* Config.option(Config.string("DEVNET_RPC_URL"))
  if (Option.isSome(attach)) return yield* attachedDevnet(attach.value)
  const port = yield* devnetPort
  const net = yield* Effect.acquireRelease(
    Effect.tryPromise({
      try: () =>
        startDevnet({
          port,
          stateFile: path.join(config.dataDir, "devnet", "anvil-state.json"),
          compileCacheDir: path.join(config.dataDir, "devnet", "solc-cache")
        }),
      catch: (error) => new ChainStartError({ message: `devnet (anvil) failed to start: ${String(error)}` })
    }),
    (net) => Effect.promise(() => net.stop())
  )
  const treasury = net.accounts[0]
  if (treasury === undefined) return yield* new ChainStartError({ message: "devnet has no account 0" })
  return yield* connectChain({
    mode: "devnet",
    rpcUrl: net.rpcUrl,
    usdcAddress: net.usdcAddress,
    signerKey: Option.some(treasury.privateKey),
    treasuryAddress: Option.none(),
    devAccounts: net.accounts
  })
})

const rpc = Effect.gen(function* () {
  const config = yield* AppConfig
  const rpcUrl = Option.getOrThrow(config.chainRpcUrl)
  const key = Option.map(config.treasuryPrivateKey, Redacted.value)
  if (Option.isSome(key) && DEV_PRIVATE_KEYS.some((dev) => dev.toLowerCase() === key.value.toLowerCase())) {
    return yield* new ChainStartError({
      message: "TREASURY_PRIVATE_KEY is a well-known anvil dev key; refusing to use it outside devnet"
    })
  }
  const treasuryAddress = yield* Config.option(
    Config.string("TREASURY_ADDRESS").pipe(
      Config.validate({ message: "TREASURY_ADDRESS must be an address", validation: (s) => /^0x[0-9a-fA-F]{40}$/.test(s) }),
      Config.map((s) => getAddress(s))
    )
  )
  if (Option.isNone(key)) {
    // Config refuses this first; kept here so a Chain built from other settings cannot come up unable to pay out.
    return yield* new ChainStartError({
      message: "TREASURY_PRIVATE_KEY is required: without it nothing could pay refunds, withdrawals, dispute payouts or chain remainders"
    })
  }
  const keyAddress = privateKeyToAccount(key.value).address
  if (Option.isSome(treasuryAddress) && treasuryAddress.value !== keyAddress) {
    return yield* new ChainStartError({
      message: `TREASURY_ADDRESS ${treasuryAddress.value} is not the address of TREASURY_PRIVATE_KEY (${keyAddress}): payments must arrive where payouts are signed`
    })
  }
  const network = yield* Config.option(Config.string("X402_NETWORK"))
  const batcherAddress = yield* Config.option(
    Config.string("SETTLEMENT_BATCHER_ADDRESS").pipe(
      Config.validate({ message: "SETTLEMENT_BATCHER_ADDRESS must be an address", validation: (s) => /^0x[0-9a-fA-F]{40}$/.test(s) }),
      Config.map((s) => getAddress(s))
    )
  )
  const rpcTimeoutMs = yield* Config.integer("CHAIN_RPC_TIMEOUT_MS").pipe(
    Config.withDefault(RPC_DEFAULT_TIMEOUT_MS),
    Config.validate({ message: "CHAIN_RPC_TIMEOUT_MS must be between 500 and 10000", validation: (n) => n >= 500 && n <= 10_000 })
  )
  return yield* connectChain({
    mode: "rpc",
    rpcUrl,
    rpcTimeoutMs,
    usdcAddress: Option.getOrThrow(config.usdcAddress),
    signerKey: key,
    treasuryAddress: Option.some(keyAddress),
    settlement: Option.isSome(config.facilitatorUrl) ? "facilitator" : "local",
    batcherAddress,
    ...(Option.isSome(network) ? { network: network.value } : {})
  })
})

/** Devnet or RPC, by configuration. */
export const ChainLive = Layer.scoped(
  Chain,
  Effect.flatMap(AppConfig, (config) => (config.chainMode === "devnet" ? devnet : rpc))
)
