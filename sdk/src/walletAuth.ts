// The owner's wallet signature (spec section 5): `X-Agent-Wallet` and
// `X-Agent-Signature: service-auth:{agentId}:{timestampMs}:sig:{signature}`, the message signed as a personal message.

/** What signs owner requests: any viem account (`privateKeyToAccount(key)`, a JSON-RPC account, …). */
export interface OwnerWallet {
  readonly address: `0x${string}`
  readonly signMessage: (args: { message: string }) => Promise<`0x${string}`>
}

/** A signed timestamp is single-use for changes: never sign the same millisecond twice in one process. */
let lastTimestamp = 0
const freshTimestamp = () => (lastTimestamp = Math.max(Date.now(), lastTimestamp + 1))

/**
 * The two wallet-signature headers for `agentId`, signed now (or at `timestampMs`). A signature is good for 5 minutes
 * and for one change (withdraw, PATCH, DELETE, webhook changes); reads may reuse it.
 *
 * @example
 * const headers = await walletAuthHeaders(account, agentId)
 * await fetch(`${baseUrl}/api/v1/payments/history/${agentId}`, { headers })
 */
export const walletAuthHeaders = async (wallet: OwnerWallet, agentId: string, timestampMs: number = freshTimestamp()) => {
  const message = `service-auth:${agentId}:${timestampMs}`
  const signature = await wallet.signMessage({ message })
  return { "X-Agent-Wallet": wallet.address, "X-Agent-Signature": `${message}:sig:${signature}` }
}
