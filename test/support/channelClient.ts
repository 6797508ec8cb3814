// The official batch-settlement payer, unmodified: `@x402/fetch`'s wrapFetchWithPayment over an `x402Client` with
// `@x402/evm`'s BatchSettlementEvmScheme for our devnet's network. One channel per (payer, salt); its first paid call
// deposits (`depositCalls` calls' worth when given, else what our 402 suggests), later calls pay by voucher only.
// Used by the integration tests and by bench/channels.ts (no vitest imports here).
import { toClientEvmSigner } from "@x402/evm"
import { BatchSettlementEvmScheme, computeChannelId } from "@x402/evm/batch-settlement/client"
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { createPublicClient, type Hex, http, keccak256, toHex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/accounts.js"

/** Our devnet's network as x402 v2 names it (chain id 84532). */
export const DEVNET_NETWORK = "eip155:84532"

export interface ChannelClientOptions {
  readonly rpcUrl: string
  readonly usdc: Hex
  /** Names the channel among the payer's others (hashed to the channel config's salt); default: the package's zero salt. */
  readonly salt?: string
  /** The first call deposits this many calls' worth (a `depositStrategy`); default: our 402's `extra.minDeposit` (100 calls). */
  readonly depositCalls?: number
  /** The most one payment may ask, in micro-USDC; the deposit may be up to `depositCalls` times this (default 10 USDC). */
  readonly maxAmountPerPayment?: bigint
  /** The `fetch` under the wrapper (default: the global one). */
  readonly fetch?: typeof fetch
}

// #region docs:channel-client
/** An x402 v2 client paying by channel from `payer` on our devnet: deposits once, then signs a voucher per call. */
export const channelClient = (payer: PrivateKeyAccount, options: ChannelClientOptions) => {
  const depositCalls = options.depositCalls
  const publicClient = createPublicClient({ chain: devnetChain(options.rpcUrl), transport: http(options.rpcUrl), pollingInterval: 20 })
  // The public client lets the scheme read channels(id) on chain (recovering a channel it has no local record of).
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(payer, publicClient), {
    ...(options.salt === undefined ? {} : { salt: keccak256(toHex(options.salt)) }),
    // The deposit: `depositCalls` times the price (never less than the call needs), at most 5 × maxAmountPerPayment.
    ...(depositCalls === undefined ? {} : {
      depositStrategy: ({ requestAmount, minimumDepositAmount }: { requestAmount: string; minimumDepositAmount: string }) => {
        const wanted = BigInt(requestAmount) * BigInt(depositCalls)
        return wanted > BigInt(minimumDepositAmount) ? wanted : BigInt(minimumDepositAmount)
      }
    })
  })
  const client = new x402Client()
    .register(DEVNET_NETWORK, scheme)
    // The devnet's USDC is not one of x402's built-in assets: allow it by address, with a cap in atomic units.
    .setSpendControls({
      allowedAssets: [{ network: DEVNET_NETWORK, asset: options.usdc, maxAmountPerPayment: (options.maxAmountPerPayment ?? 10_000_000n).toString() }]
    })
  return { scheme, client, fetch: wrapFetchWithPayment(options.fetch ?? fetch, client) }
}
// #endregion

export type ChannelClient = ReturnType<typeof channelClient>

/** The id of the channel `client` pays through for these (batch-settlement) requirements. */
export const channelIdOf = (client: ChannelClient, requirements: Parameters<BatchSettlementEvmScheme["buildChannelConfig"]>[0]): Hex =>
  computeChannelId(client.scheme.buildChannelConfig(requirements), requirements.network)

/** PAYMENT-RESPONSE's `extra` of a channel-paid answer: what was charged and the channel's state as the server sees it. */
export const channelResponse = (response: Response) => {
  const header = response.headers.get("PAYMENT-RESPONSE")
  if (header === null) return undefined
  const settled = decodePaymentResponseHeader(header)
  const extra = settled.extra ?? {}
  const state = extra["channelState"]
  return {
    success: settled.success,
    chargedAmount: typeof extra["chargedAmount"] === "string" ? BigInt(extra["chargedAmount"]) : undefined,
    channelState: typeof state === "object" && state !== null ? Object.fromEntries(Object.entries(state)) : undefined
  }
}

/** The `type` of the batch-settlement payload a PAYMENT-SIGNATURE header carries ("deposit", "voucher", "refund"). */
export const payloadType = (header: string): string | undefined => {
  const decoded: unknown = JSON.parse(Buffer.from(header, "base64").toString("utf8"))
  if (typeof decoded !== "object" || decoded === null || !("payload" in decoded)) return undefined
  const payload: unknown = decoded.payload
  return typeof payload === "object" && payload !== null && "type" in payload && typeof payload.type === "string" ? payload.type : undefined
}

/** A `fetch` that keeps every PAYMENT-SIGNATURE header it sends in `sent` (what the client paid with, in order). */
export const recordingFetch = (sent: Array<string>): typeof fetch => (input, init) => {
  const header = input instanceof Request ? input.headers.get("payment-signature") : null
  if (header !== null) sent.push(header)
  return fetch(input, init)
}
