// What the chain itself records about our money: receipts, the USDC Transfer logs in them, and who used an EIP-3009
// authorization (front-runs included). Log queries are bounded to a recent block range.
import { Data, Effect, Option } from "effect"
import { decodeEventLog, getAddress, type Hex, isAddressEqual, type TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"

export class ChainReadError extends Data.TaggedError("ChainReadError")<{ readonly message: string }> {}

/** How far back (blocks) an authorization is looked up; a payment is valid for minutes, this covers days of blocks. */
export const LOG_LOOKBACK_BLOCKS = 200_000n

const read = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (error) => new ChainReadError({ message: `${what}: ${String(error).slice(0, 300)}` }) })

export const receiptOf = (chain: ChainShape, hash: Hex) =>
  read("receipt", () => chain.publicClient.getTransactionReceipt({ hash }).then((r) => Option.some(r), (e: unknown) => {
    if (e instanceof Error && e.name === "TransactionReceiptNotFoundError") return Option.none<TransactionReceipt>()
    throw e
  }))

/** The USDC transfers a receipt carries. */
export const transfersIn = (chain: ChainShape, receipt: Pick<TransactionReceipt, "logs">) =>
  receipt.logs.flatMap((log) => {
    if (!isAddressEqual(log.address, chain.usdc.address)) return []
    try {
      const decoded = decodeEventLog({ abi: usdcAbi, data: log.data, topics: log.topics, strict: true })
      return decoded.eventName === "Transfer"
        ? [{ from: getAddress(decoded.args.from), to: getAddress(decoded.args.to), value: decoded.args.value }]
        : []
    } catch {
      return []
    }
  })

/** True when the receipt moved exactly `amount` USDC from `from` to `to`. */
export const movedExactly = (chain: ChainShape, receipt: Pick<TransactionReceipt, "logs">, from: string, to: string, amount: bigint) =>
  transfersIn(chain, receipt).some((t) => isAddressEqual(t.from, getAddress(from)) && isAddressEqual(t.to, getAddress(to)) && t.value === amount)

/** The signer's count of mined transactions (the next nonce the chain will accept). */
export const minedNonce = (chain: ChainShape, address: `0x${string}`) =>
  read("nonce", () => chain.publicClient.getTransactionCount({ address, blockTag: "latest" })).pipe(Effect.map(BigInt))

/** The signer's next nonce counting transactions still in the node's pool. */
export const pendingNonce = (chain: ChainShape, address: `0x${string}`) =>
  read("nonce", () => chain.publicClient.getTransactionCount({ address, blockTag: "pending" })).pipe(Effect.map(BigInt))

/** The chain's head: one height to read several things at, so that they describe the same chain. */
export const headBlock = (chain: ChainShape) =>
  read("head block", () => chain.publicClient.getBlock({ blockTag: "latest" })).pipe(
    Effect.map((b) => ({ number: b.number, timestamp: b.timestamp }))
  )

/** The payer's USDC at `block`. */
export const balanceAt = (chain: ChainShape, owner: string, block: bigint) =>
  read("balance", () =>
    chain.publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [getAddress(owner)], blockNumber: block }))

/**
 * The transaction that used an authorization, whoever sent it, if it paid `to` exactly `amount` from `payer`:
 * AuthorizationUsed(payer, nonce) in a recent block, then its receipt's Transfer log. `at`: everything is read at that
 * height (the caller reads more at it); otherwise at the head.
 */
export const authorizationPayment = (chain: ChainShape, payer: string, nonce: Hex, to: string, amount: bigint, at?: bigint) =>
  Effect.gen(function* () {
    const used = yield* read("authorizationState", () =>
      chain.publicClient.readContract({
        address: chain.usdc.address,
        abi: usdcAbi,
        functionName: "authorizationState",
        args: [getAddress(payer), nonce],
        ...(at === undefined ? {} : { blockNumber: at })
      }))
    if (!used) return { used: false, payment: Option.none<{ readonly txHash: Hex; readonly block: bigint }>() } as const
    const latest = at ?? (yield* read("block number", () => chain.publicClient.getBlockNumber({ cacheTime: 0 })))
    const logs = yield* read("AuthorizationUsed logs", () =>
      chain.publicClient.getContractEvents({
        address: chain.usdc.address,
        abi: usdcAbi,
        eventName: "AuthorizationUsed",
        args: { authorizer: getAddress(payer), nonce },
        fromBlock: latest > LOG_LOOKBACK_BLOCKS ? latest - LOG_LOOKBACK_BLOCKS : 0n,
        toBlock: latest,
        strict: true
      }))
    for (const log of logs.slice(0, 5)) {
      const receipt = yield* receiptOf(chain, log.transactionHash)
      if (Option.isSome(receipt) && receipt.value.status === "success" && movedExactly(chain, receipt.value, payer, to, amount)) {
        return { used: true, payment: Option.some({ txHash: log.transactionHash, block: receipt.value.blockNumber }) } as const
      }
    }
    return { used: true, payment: Option.none<{ readonly txHash: Hex; readonly block: bigint }>() } as const
  })
