// The PAYMENT-RESPONSE of a voucher-paid call (x402 v2 SettleResponse, as @x402/evm's batch-settlement server answers):
// no transaction (nothing went on chain for this call), and in `extra` what the call took from the channel
// (`chargedAmount`, at most the request's amount) and the channel's charged cumulative the payer's next voucher builds
// on. The scheme's client adds `chargedAmount` to its own cumulative and checks it against ours.
import { RECEIPT_EXTENSION } from "../v2.js"

export const channelSettleResponse = (input: {
  readonly network: string
  readonly payer: string
  readonly channelId: string
  readonly chargedAmount: bigint
  readonly chargedCumulative: bigint
  readonly receipt?: unknown
}) => ({
  success: true as const,
  transaction: "",
  network: input.network,
  payer: input.payer,
  amount: "",
  extra: {
    chargedAmount: input.chargedAmount.toString(),
    channelState: { channelId: input.channelId, chargedCumulativeAmount: input.chargedCumulative.toString() }
  },
  ...(input.receipt === undefined || input.receipt === null ? {} : { extensions: { [RECEIPT_EXTENSION]: input.receipt } })
})
