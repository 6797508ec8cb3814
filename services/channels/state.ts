// Our channel row as the scheme's voucher rules read it (layers/x402/batchSettlement/voucher.ts `ChannelState`).
import type { Hex } from "viem"
import type { ChannelState } from "../../layers/x402/batchSettlement/voucher.js"
import type { ChannelRow } from "./Repo.js"

export const stateOf = (row: ChannelRow): ChannelState => ({
  balance: row.balance,
  totalClaimed: row.claimedCumulative,
  chargedCumulative: row.chargedCumulative,
  withdrawRequestedAt: 0,
  refundNonce: 0n,
  ...(row.voucherMaxClaimable !== null && row.voucherSignature !== null
    ? { lastVoucher: { signedMaxClaimable: row.voucherMaxClaimable, signature: row.voucherSignature as Hex } }
    : {})
})

/** A channel we hold no row of: nothing charged, nothing claimed (a deposit's voucher is checked against this). */
export const emptyState: ChannelState = { balance: 0n, totalClaimed: 0n, chargedCumulative: 0n, withdrawRequestedAt: 0, refundNonce: 0n }
