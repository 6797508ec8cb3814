// Voucher-paid calls sent by hand, as the official client builds them: the challenge's batch-settlement offer, then a
// call whose PAYMENT-SIGNATURE carries the payer's voucher over a chosen cumulative ceiling on its channel.
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { computeChannelId, signVoucher } from "@x402/evm/batch-settlement/client"
import { decodePaymentResponseHeader } from "@x402/fetch"
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { NETWORK, type TestChannelConfig } from "./channelOpen.js"

export const echoBody = (agentId: string, text: string) => JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text } })

/** The challenge's batch-settlement offer, as a payer's client reads it from PAYMENT-REQUIRED. */
export const channelOffer = (baseUrl: string, agentId: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: echoBody(agentId, "offer") })
    const required = decodePaymentRequiredHeader(response.headers.get("PAYMENT-REQUIRED")!)
    return required.accepts.find((a) => a.scheme === "batch-settlement")!
  })

/** The payer's voucher header over `maxClaimable` on the channel of `config`. */
export const voucherHeader = async (payer: PrivateKeyAccount, config: TestChannelConfig, maxClaimable: bigint, accepted: unknown) =>
  encodeHeaderJson({
    x402Version: 2,
    accepted,
    payload: { type: "voucher", channelConfig: config, voucher: await signVoucher(payer, computeChannelId(config, NETWORK), maxClaimable.toString(), NETWORK) }
  })

export interface VoucherCallResult {
  readonly status: number
  readonly requestId: string | undefined
  /** The answer's `data` (the execution view). */
  readonly data: Record<string, unknown> | undefined
  readonly errorCode: string | undefined
  readonly clientId: string | null
  /** What PAYMENT-RESPONSE says the channel took (chargedAmount, chargedCumulativeAmount), on success. */
  readonly charged: { readonly amount: bigint; readonly cumulative: bigint } | undefined
  /** The 402's x402 reason (PAYMENT-REQUIRED `error`). */
  readonly reason: string | undefined
  /** The corrective 402's channel state: the charged total to sign over. */
  readonly correctiveCumulative: bigint | undefined
}

/** One echo call paid by a voucher over `maxClaimable`, sent to `baseUrl` (fetch, no client-side retry). */
export const voucherCallPromise = async (
  baseUrl: string,
  agentId: string,
  text: string,
  p: {
    readonly payer: PrivateKeyAccount
    readonly config: TestChannelConfig
    readonly maxClaimable: bigint
    readonly accepted: unknown
    /** Extra request headers (X-Chain-Budget). */
    readonly headers?: Record<string, string>
  }
): Promise<VoucherCallResult> => {
  const header = await voucherHeader(p.payer, p.config, p.maxClaimable, p.accepted)
  const response = await fetch(`${baseUrl}/api/v1/execute`, {
    method: "POST",
    headers: { "content-type": "application/json", "PAYMENT-SIGNATURE": header, ...p.headers },
    body: echoBody(agentId, text)
  })
  const json = (await response.json()) as { data?: { requestId: string } & Record<string, unknown>; error?: { code: string } }
  const paid = response.headers.get("PAYMENT-RESPONSE")
  const extra = paid === null ? undefined : (decodePaymentResponseHeader(paid).extra as { chargedAmount: string; channelState: { chargedCumulativeAmount: string } })
  const required = response.headers.get("PAYMENT-REQUIRED")
  const challenge = required === null ? undefined : decodePaymentRequiredHeader(required)
  const offer = challenge?.accepts.find((a) => a.scheme === "batch-settlement")
  const state = (offer?.extra as { channelState?: { chargedCumulativeAmount?: string } } | undefined)?.channelState
  return {
    status: response.status,
    requestId: json.data?.requestId,
    data: json.data,
    errorCode: json.error?.code,
    clientId: response.headers.get("x-client-id"),
    reason: challenge?.error,
    charged: extra === undefined ? undefined : { amount: BigInt(extra.chargedAmount), cumulative: BigInt(extra.channelState.chargedCumulativeAmount) },
    correctiveCumulative: state?.chargedCumulativeAmount === undefined ? undefined : BigInt(state.chargedCumulativeAmount)
  }
}

export const voucherCall = (...args: Parameters<typeof voucherCallPromise>) => Effect.promise(() => voucherCallPromise(...args))
