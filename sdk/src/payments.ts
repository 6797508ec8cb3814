// Paying the marketplace's 402 challenges with the official x402 clients: @x402/fetch (v2, the default) or x402-fetch
// (v1, an optional peer loaded only when asked for: it brings ~700 MB of wallet packages), from one viem account, under
// a per-payment cap.
import { x402Client, wrapFetchWithPayment as wrapV2 } from "@x402/fetch"
import { ExactEvmScheme } from "@x402/evm/exact/client"
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
}

interface ChainInfo {
  readonly chain: { readonly chainId: number; readonly usdc: string }
}

/**
 * A `fetch` that answers a 402 by paying it once and sending the request again.
 * @example const pay = payingFetch({ baseUrl, wallet, x402: "v2", maxPayment: "1.00" }); await pay(url, { method: "POST", … })
 */
export const payingFetch = (options: PayerOptions): Fetch => {
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
    return new x402Client()
      .register(network, new ExactEvmScheme(toClientEvmSigner(options.wallet)))
      .setSpendControls({ allowedAssets: [{ network, asset: data.chain.usdc, maxAmountPerPayment: cap.toString() }] })
  }
  return async (url, init) => {
    client ??= makeClient()
    client.catch(() => (client = undefined))
    return await wrapV2(fetch, await client)(url, init)
  }
}
