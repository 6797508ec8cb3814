// Paying the marketplace's 402 challenges with the official x402 clients: @x402/fetch (v2, the default) or x402-fetch
// (v1, an optional peer loaded only when asked for: it brings ~700 MB of wallet packages), from one viem account, under
// a per-payment cap.
import { x402Client, wrapFetchWithPayment as wrapV2 } from "@x402/fetch"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { BatchSettlementEvmScheme } from "@x402/evm/batch-settlement/client"
import { toClientEvmSigner } from "@x402/evm"
import type { LocalAccount } from "viem"
import { MarketplaceError } from "./errors.js"
import { type Fetch, joinUrl, request } from "./http.js"
import { toMicro } from "./money.js"

/** A viem local account: `privateKeyToAccount(key)` or `mnemonicToAccount(…)`. It signs payments and owner requests. */
export type Wallet = LocalAccount

export interface PayerOptions {
  readonly baseUrl: string
  readonly wallet: Wallet
  /** Which x402 version pays: "v2" (@x402/fetch, the default) or "v1" (needs `npm install x402-fetch` beside the SDK). */
  readonly x402?: "v1" | "v2"
  /**
   * The most one payment may be, in USDC (default "0.10", the official clients' own default, which refuses dearer payments).
   * Raise it for chain budgets or dear capabilities, e.g. "5.00".
   */
  readonly maxPayment?: string
  /**
   * Pay by payment channel (x402 `batch-settlement`, v2 only) where the service offers one: the first call deposits
   * `deposit` USDC (default "1.00") into a channel with the marketplace as receiver, later calls send a signed voucher
   * each and wait for no block; `close()` (on the client) gives back what was not spent. `salt` picks another channel.
   */
  readonly channel?: { readonly deposit?: string; readonly salt?: `0x${string}` }
}

interface ChainInfo {
  readonly chain: { readonly chainId: number; readonly usdc: string }
}

/**
 * A `fetch` that answers a 402 by paying it once and sending the request again.
 * @example const pay = payingFetch({ baseUrl, wallet, x402: "v2", maxPayment: "1.00" }); await pay(url, { method: "POST", … })
 */
export const payingFetch = (options: PayerOptions, channels: BatchSettlementEvmScheme | undefined = channelScheme(options)): Fetch => {
  const cap = toMicro(options.maxPayment ?? "0.10")
  if (options.x402 === "v1") {
    let v1: Promise<Fetch> | undefined
    const load = () =>
      import("x402-fetch").then(
        ({ wrapFetchWithPayment }): Fetch => {
          const pay = wrapFetchWithPayment(fetch, options.wallet, cap)
          return (url, init) => pay(url, init)
        },
        (cause: unknown) => {
          throw new MarketplaceError("SDK_X402_V1_MISSING", `x402: "v1" pays with the x402-fetch package: npm install x402-fetch (${String(cause)})`, 0)
        }
      )
    return async (url, init) => (await (v1 ??= load()))(url, init)
  }
  // v2: the network and the USDC come from the service's public /health (the devnet's USDC is not one x402 knows).
  let client: Promise<x402Client> | undefined
  const makeClient = async () => {
    const { data } = await request<ChainInfo>(joinUrl(options.baseUrl, "/health"))
    const network = `eip155:${data.chain.chainId}` as const
    const client = new x402Client()
      .register(network, new ExactEvmScheme(toClientEvmSigner(options.wallet)))
      .setSpendControls({ allowedAssets: [{ network, asset: data.chain.usdc, maxAmountPerPayment: cap.toString() }] })
    if (channels !== undefined) {
      client.register(network, channels)
      // The channel first, where offered; `exact` where not (a chain's budget, a service without the contracts).
      client.registerPolicy((_version, requirements) => {
        const byChannel = requirements.filter((r) => r.scheme === "batch-settlement")
        return byChannel.length > 0 ? byChannel : requirements
      })
    }
    return client
  }
  return async (url, init) => {
    client ??= makeClient()
    client.catch(() => (client = undefined))
    return await wrapV2(fetch, await client)(url, init)
  }
}

/**
 * The official batch-settlement client scheme for `options.channel` (none without it): deposits of the asked size
 * (the offer's suggestion otherwise), its deposit cap raised to cover them.
 */
export const channelScheme = (options: PayerOptions): BatchSettlementEvmScheme | undefined => {
  if (options.channel === undefined || options.x402 === "v1") return undefined
  const cap = toMicro(options.maxPayment ?? "0.10")
  const deposit = toMicro(options.channel.deposit ?? "1.00")
  const multiplier = Number(deposit / (cap > 0n ? cap : 1n)) + 1
  return new BatchSettlementEvmScheme(toClientEvmSigner(options.wallet), {
    depositPolicy: { depositMultiplier: Math.max(5, multiplier) },
    depositStrategy: (context) => (BigInt(context.minimumDepositAmount) > deposit ? undefined : deposit.toString()),
    ...(options.channel.salt === undefined ? {} : { salt: options.channel.salt })
  })
}
