// The networks one deployment takes payments on: the primary (the `Chain` service: withdrawals and everything that only
// needs one chain use it) and, when configured, a second one (Ethereum): its own RPC, USDC, batcher and confirmations,
// paid into the same treasury key. Devnet: DEVNET_SECOND_NETWORK=ethereum starts a second anvil (chain id 1).
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"
import * as path from "node:path"
import { getAddress } from "viem"
import { Chain, ChainStartError, type ChainShape, connectChain } from "./Chain.js"
import { RPC_DEFAULT_TIMEOUT_MS } from "./chainTransport.js"
import { AppConfig } from "./Config.js"
import { MAX_CONFIRMATIONS, UNKNOWN_CHAIN_CONFIRMATIONS } from "./confirmations.js"
import {
  DEV_PRIVATE_KEYS,
  DEVNET_SECOND_SETTLEMENT_BATCHER_ADDRESS,
  DEVNET_SECOND_USDC_ADDRESS,
  startDevnet
} from "./devnet/anvil.js"
import { caip2Of } from "./x402/v2.js"

export interface NetworksShape {
  /** The primary network (the `Chain` service). */
  readonly primary: ChainShape
  /** Every configured network, the primary first: the order of a 402 challenge's `accepts`. */
  readonly all: ReadonlyArray<ChainShape>
  /** The network a payment row, batch or treasury transaction names; none when it is not configured here. */
  readonly find: (network: string) => Option.Option<ChainShape>
  /** The same by x402 v2 (CAIP-2) id, "eip155:1". */
  readonly findCaip2: (caip2: string) => Option.Option<ChainShape>
  /** The network a stored row names, or the primary for a row written before networks existed (or a blank). */
  readonly of: (network: string | null | undefined) => ChainShape
  /** The ledger's treasury account of a network: "treasury" for the primary, "treasury:<network>" for another. */
  readonly treasuryAccount: (network: string | null | undefined) => string
}

export class Networks extends Context.Tag("Networks")<Networks, NetworksShape>() {}

/** The networks from a list: lookups by name and CAIP-2 id (a Map get: nothing on the hot path). */
export const makeNetworks = (primary: ChainShape, others: ReadonlyArray<ChainShape>): NetworksShape => {
  const all = [primary, ...others]
  const byName = new Map(all.map((c) => [c.network, c]))
  const byCaip2 = new Map(all.map((c) => [caip2Of(c.chainId), c]))
  return {
    primary,
    all,
    find: (network) => Option.fromNullable(byName.get(network)),
    findCaip2: (caip2) => Option.fromNullable(byCaip2.get(caip2)),
    of: (network) => (network === null || network === undefined ? primary : byName.get(network) ?? primary),
    treasuryAccount: (network) => {
      const chain = network === null || network === undefined ? primary : byName.get(network) ?? primary
      return chain === primary ? "treasury" : `treasury:${chain.network}`
    }
  }
}

const address = (name: string) =>
  Config.string(name).pipe(
    Config.validate({ message: `${name} must be an address`, validation: (s) => /^0x[0-9a-fA-F]{40}$/.test(s) }),
    Config.map((s) => getAddress(s))
  )

const confirmationsOf = (name: string) =>
  Config.option(Config.integer(name).pipe(
    Config.validate({ message: `${name} must be an integer from 1 to ${MAX_CONFIRMATIONS}`, validation: (n) => n >= 1 && n <= MAX_CONFIRMATIONS })
  ))

/**
 * The devnet's second network: "ethereum" (chain id 1, the spec's; x402 v2 payers only) or "polygon" (137, a chain x402
 * v1 names: both clients can pay it, which is how the devnet shows a v1 payer on a second network).
 */
type DevnetSecondName = "ethereum" | "polygon"
const DEVNET_SECOND_CHAIN_IDS: Record<DevnetSecondName, number> = { ethereum: 1, polygon: 137 }

/** Devnet: the second anvil, started here or attached (DEVNET_SECOND_RPC_URL). */
const devnetSecond = (primary: ChainShape, name: DevnetSecondName) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const key = DEV_PRIVATE_KEYS[0]!
    const attach = yield* Config.option(Config.string("DEVNET_SECOND_RPC_URL"))
    const secondChainId = DEVNET_SECOND_CHAIN_IDS[name]
    const rpcUrl = Option.isSome(attach) ? attach.value : (yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          startDevnet({
            network: "second",
            secondChainId,
            port: 0,
            stateFile: path.join(config.dataDir, `devnet-${name}`, "anvil-state.json"),
            compileCacheDir: path.join(config.dataDir, "devnet", "solc-cache")
          }),
        catch: (error) => new ChainStartError({ message: `the second devnet network (anvil) failed to start: ${String(error)}` })
      }),
      (net) => Effect.promise(() => net.stop())
    )).rpcUrl
    return yield* connectChain({
      mode: "devnet",
      rpcUrl,
      usdcAddress: DEVNET_SECOND_USDC_ADDRESS,
      signerKey: Option.some(key),
      treasuryAddress: Option.none(),
      batcherAddress: Option.some(DEVNET_SECOND_SETTLEMENT_BATCHER_ADDRESS),
      devAccounts: primary.devAccounts,
      confirmations: 1
    })
  })

/** A real second network: ETHEREUM_RPC_URL, ETHEREUM_USDC_ADDRESS, the same treasury key (settled by it, not a facilitator). */
const rpcSecond = (rpcUrl: string) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (Option.isSome(config.facilitatorUrl)) {
      return yield* new ChainStartError({ message: "ETHEREUM_RPC_URL with FACILITATOR_URL: a second network is settled by the treasury key only; unset one" })
    }
    const key = Option.map(config.treasuryPrivateKey, Redacted.value)
    const usdcAddress = yield* address("ETHEREUM_USDC_ADDRESS").pipe(
      Effect.mapError(() => new ChainStartError({ message: "ETHEREUM_RPC_URL is set: ETHEREUM_USDC_ADDRESS (USDC on that network) is required" }))
    )
    const batcherAddress = yield* Config.option(address("ETHEREUM_SETTLEMENT_BATCHER_ADDRESS"))
    const confirmations = yield* confirmationsOf("ETHEREUM_CONFIRMATIONS")
    return yield* connectChain({
      mode: "rpc",
      rpcUrl,
      rpcTimeoutMs: RPC_DEFAULT_TIMEOUT_MS,
      usdcAddress,
      signerKey: key,
      treasuryAddress: Option.none(),
      batcherAddress,
      // Not CHAIN_CONFIRMATIONS (the primary's): Ethereum's default unless ETHEREUM_CONFIRMATIONS says otherwise.
      confirmations: Option.getOrElse(confirmations, () => UNKNOWN_CHAIN_CONFIRMATIONS)
    })
  })

/** The configured networks on top of the primary `Chain`; a second network must pay the same treasury. */
export const NetworksLive = Layer.scoped(
  Networks,
  Effect.gen(function* () {
    const primary = yield* Chain
    const config = yield* AppConfig
    const secondDevnet = yield* Config.option(Config.literal("ethereum", "polygon")("DEVNET_SECOND_NETWORK"))
    const secondRpc = yield* Config.option(Config.string("ETHEREUM_RPC_URL"))
    const second = config.chainMode === "devnet"
      ? (Option.isSome(secondDevnet) ? Option.some(yield* devnetSecond(primary, secondDevnet.value)) : Option.none())
      : (Option.isSome(secondRpc) ? Option.some(yield* rpcSecond(secondRpc.value)) : Option.none())
    if (Option.isSome(second)) {
      const s = second.value
      if (s.chainId === primary.chainId) {
        return yield* new ChainStartError({ message: `the second network serves chain id ${s.chainId}, the primary's: configure another chain` })
      }
      if (s.treasury !== primary.treasury) {
        return yield* new ChainStartError({ message: `the second network's treasury ${s.treasury} is not the primary's ${primary.treasury}` })
      }
    }
    return makeNetworks(primary, Option.toArray(second))
  })
)

/** Only the primary network (tests and tools that build a `Chain` by hand). */
export const PrimaryOnlyLive = Layer.effect(Networks, Effect.map(Chain, (primary) => makeNetworks(primary, [])))
