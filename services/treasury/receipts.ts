// Receipt polling for a lone waiter (the settler's loop): asks the node directly at its own pace.
import type { Hex, TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"

/**
 * Asks for the receipt every `everyMs` until `timeoutMs` (RPC faults count as "not yet"). For a lone waiter: viem's
 * waiter follows new blocks, and when our transaction is the last one (a devnet mines a block per transaction) a
 * receipt it asked for a moment too early is never asked for again until its timeout.
 */
export const pollReceipt = async (chain: ChainShape, hash: Hex, timeoutMs: number, everyMs: number): Promise<TransactionReceipt> => {
  const deadline = Date.now() + timeoutMs
  let last: unknown = "not mined"
  for (;;) {
    const receipt = await chain.publicClient.getTransactionReceipt({ hash }).catch((error: unknown) => {
      last = error
      return undefined
    })
    if (receipt !== undefined) return receipt
    if (Date.now() >= deadline) throw new Error(`no receipt within ${timeoutMs} ms (${String(last).slice(0, 200)})`)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}
