// What x402BatchSettlement says at one block about our channels and our receiver: `channels(id)` for many channels and
// `receivers(treasury, token)`, batched through Multicall3 (at its canonical address on every chain and the devnet).
import { Effect } from "effect"
import { getAddress, type Hex, parseAbi } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { BATCH_SETTLEMENT_ADDRESS, MULTICALL3_ADDRESS } from "../../layers/x402/channelContracts.js"
import type { ChannelOnChain } from "./channelDrift.js"
import { ChainReadError } from "./chainReads.js"

/** The two getters of the contract's published ABI that the reconciliation reads. */
export const channelViewsAbi = parseAbi([
  "function channels(bytes32 channelId) view returns (uint128 balance, uint128 totalClaimed)",
  "function receivers(address receiver, address token) view returns (uint128 totalClaimed, uint128 totalSettled)"
])

/** Channels per Multicall3 call: a few hundred keep each eth_call small for any provider. */
export const CHANNELS_PER_CALL = 300

const isBytes32 = (s: string): s is Hex => /^0x[0-9a-fA-F]{64}$/.test(s)

const read = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (error) => new ChainReadError({ message: `${what}: ${String(error).slice(0, 300)}` }) })

/** The receiver's claimed and settled totals in `token`, and each channel's balance and totalClaimed, at `block`. */
export const channelStatesAt = (chain: ChainShape, channelIds: ReadonlyArray<string>, block: bigint) =>
  Effect.gen(function* () {
    const ids = channelIds.filter(isBytes32)
    const receiver = yield* read("receivers", () =>
      chain.publicClient.readContract({
        address: BATCH_SETTLEMENT_ADDRESS,
        abi: channelViewsAbi,
        functionName: "receivers",
        args: [getAddress(chain.treasury), getAddress(chain.usdc.address)],
        blockNumber: block
      }))
    const chunks: Array<ReadonlyArray<Hex>> = []
    for (let i = 0; i < ids.length; i += CHANNELS_PER_CALL) chunks.push(ids.slice(i, i + CHANNELS_PER_CALL))
    const states = new Map<string, ChannelOnChain>()
    yield* Effect.forEach(chunks, (chunk) =>
      read("channels", () =>
        chain.publicClient.multicall({
          contracts: chunk.map((id) => ({ address: BATCH_SETTLEMENT_ADDRESS, abi: channelViewsAbi, functionName: "channels" as const, args: [id] as const })),
          allowFailure: false,
          multicallAddress: MULTICALL3_ADDRESS,
          blockNumber: block
        })).pipe(Effect.map((results) => results.forEach(([balance, totalClaimed], i) => {
          const id = chunk[i]
          if (id !== undefined) states.set(id.toLowerCase(), { balance, totalClaimed })
        }))), { concurrency: 2, discard: true })
    const channels: ReadonlyMap<string, ChannelOnChain> = states
    return { totalClaimed: receiver[0], totalSettled: receiver[1], channels }
  })
