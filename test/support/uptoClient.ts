// The official upto payer, unmodified: `@x402/fetch`'s wrapFetchWithPayment over an `x402Client` with `@x402/evm`'s
// upto client scheme for our devnet's network, and the same scheme's payloads sent by hand (a tampered offer, a
// replayed header). Permit2 approval is the payer's one-time step (docs/clients.md "Paying with upto").
import { PERMIT2_ADDRESS, toClientEvmSigner } from "@x402/evm"
import { UptoEvmScheme } from "@x402/evm/upto/client"
import type { PaymentRequirements } from "@x402/core/types"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { createPublicClient, type Hex, http, maxUint256 } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { walletFor } from "./clients.js"

export const DEVNET_NETWORK = "eip155:84532"

// #region docs:upto-client
/** An x402 v2 payer of metered calls with upto from `payer` on our devnet (at most 1 USDC a payment). */
export const uptoPayer = (payer: PrivateKeyAccount, options: { readonly rpcUrl: string; readonly usdc: Hex }) => {
  const publicClient = createPublicClient({ chain: devnetChain(options.rpcUrl), transport: http(options.rpcUrl), pollingInterval: 20 })
  return new x402Client()
    .register(DEVNET_NETWORK, new UptoEvmScheme(toClientEvmSigner(payer, publicClient)))
    .setSpendControls({ allowedAssets: [{ network: DEVNET_NETWORK, asset: options.usdc, maxAmountPerPayment: "1000000" }] })
}

/** `fetch` paying with it: every metered call's 402 is answered with an upto authorization of its maximum. */
export const uptoClient = (payer: PrivateKeyAccount, options: { readonly rpcUrl: string; readonly usdc: Hex; readonly fetch?: typeof fetch }) =>
  wrapFetchWithPayment(options.fetch ?? fetch, uptoPayer(payer, options))

/** The payer's one-time approval of Permit2 for USDC (upto spends through it). */
export const approvePermit2 = async (payer: PrivateKeyAccount, usdc: Hex, amount = maxUint256) => {
  const hash = await walletFor(payer).writeContract({ address: usdc, abi: usdcAbi, functionName: "approve", args: [PERMIT2_ADDRESS, amount] })
  return hash
}
// #endregion

/** A PAYMENT-SIGNATURE header the official upto client signs for `requirements` (which a test may have altered). */
export const uptoHeader = async (payer: PrivateKeyAccount, requirements: PaymentRequirements) => {
  const { payload } = await new UptoEvmScheme(toClientEvmSigner(payer)).createPaymentPayload(2, requirements)
  return encodeHeaderJson({ x402Version: 2, accepted: requirements, payload })
}
