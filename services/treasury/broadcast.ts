// Sending a treasury transaction's stored bytes: the first broadcast (with its receipt in the same call where the node
// can), a broadcast again (the worker's, after a lease), and resends while a receipt is awaited after a first broadcast
// that failed. The chain takes one transaction per nonce, so sending the same bytes again is always harmless.
import { Clock, Duration, Effect, Either, Option } from "effect"
import type { Hex, TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import type { MachineHost } from "../../machines/Host.js"
import { methodMissing } from "./sendSync.js"

/** How often bytes whose first broadcast failed are sent again while their receipt is awaited (a block on Base). */
const RESEND_EVERY_MS = 2_000

export const broadcaster = (chain: ChainShape, host: MachineHost) => {
  /** A node's answer that means the bytes are already there (or mined): not a failure. */
  const alreadyThere = (error: unknown) => /already known|already imported|nonce too low|known transaction/i.test(String(error))

  /** One send of stored bytes, a node that already has them counting as sent. */
  const send = (rawTx: string) =>
    Effect.tryPromise(() => chain.publicClient.sendRawTransaction({ serializedTransaction: rawTx as Hex })).pipe(
      Effect.catchIf((e) => alreadyThere(e.error), () => Effect.void),
      // At once, not on a schedule: a fault that outlasts the tries is left to the receipt wait's resends, then to
      // the worker after the lease. Not on an RPC: a hanging provider holds each try for the transport's timeout
      // (layers/chainTransport.ts), and tries here would multiply that wait past every bound.
      Effect.retry({ times: chain.mode === "devnet" ? 2 : 0 }),
      Effect.either
    )

  /**
   * Sends the stored bytes (again). A failure is retried (twice on a devnet; viem tries a send once on an RPC) and
   * recorded; the receipt wait sends again (`resendUntilSent`), and the worker after the lease. A first broadcast that
   * succeeds is not a separate step in the machine (signed → mined is a valid path): it costs no database round trip.
   */
  const broadcast = (tx: { readonly id: string; readonly rawTx: string }, record: "always" | "failures" = "always") =>
    Effect.gen(function* () {
      const sent = yield* send(tx.rawTx)
      const at = yield* Clock.currentTimeMillis
      if (sent._tag === "Left") {
        yield* host.deliverNow("treasury", tx.id, { type: "BROADCAST_FAILED", at, error: String(sent.left.error).slice(0, 300) })
      } else if (record === "always") {
        yield* host.deliverNow("treasury", tx.id, { type: "BROADCAST", at })
      }
      return sent._tag === "Right"
    })

  /**
   * Whether to send with eth_sendRawTransactionSync (EIP-7966: the node answers with the receipt, saving the receipt
   * round trip and its poll): on a devnet (anvil mines on submission, so the call returns at once) until the node
   * answers method-not-found. Not on an RPC: there the call would hold the transport for up to a block time, against
   * its per-try timeout and retries (docs/decisions/chain-transport-and-faults.md, "Settlement send: eth_sendRawTransactionSync").
   */
  let sendSync = chain.mode === "devnet" && process.env["CHAIN_SEND_SYNC"] !== "0"
  /**
   * The first broadcast of stored bytes, waiting for their receipt in the same call when the node can (sendSync).
   * Any failure of that call falls back to the plain broadcast (the same bytes again: harmless) and none: the caller
   * then awaits the receipt as before.
   */
  const broadcastFirst = (tx: { readonly id: string; readonly rawTx: string }, withReceipt: boolean) =>
    Effect.gen(function* () {
      if (withReceipt && sendSync) {
        const receipt = yield* Effect.either(Effect.tryPromise(() => chain.publicClient.sendRawTransactionSync({ serializedTransaction: tx.rawTx as Hex })))
        if (receipt._tag === "Right") return { sent: true, receipt: Option.some(receipt.right) }
        if (methodMissing(receipt.left.error)) {
          sendSync = false
          yield* Effect.logInfo("the chain node does not answer eth_sendRawTransactionSync: settlements send, then ask for their receipt")
        }
      }
      return { sent: yield* broadcast(tx, "failures"), receipt: Option.none<TransactionReceipt>() }
    })

  /**
   * The stored bytes of a first broadcast that failed, sent again every RESEND_EVERY_MS until a node takes them, then
   * recorded as broadcast. Beside the receipt wait, within its bound: an RPC that failed for a few seconds delays the
   * transaction by about that long, not by the whole wait and the lease after it (every later settlement of the
   * network waits behind it). Failed tries are not recorded again (the first failure was).
   */
  const resendUntilSent = (tx: { readonly id: string; readonly rawTx: string; readonly txHash: string }) =>
    Effect.sleep(Duration.millis(RESEND_EVERY_MS)).pipe(
      Effect.zipRight(send(tx.rawTx)),
      Effect.repeat({ until: Either.isRight }),
      Effect.zipRight(
        Effect.flatMap(Clock.currentTimeMillis, (at) => host.deliverNow("treasury", tx.id, { type: "BROADCAST", at })).pipe(
          Effect.zipRight(Effect.logInfo(`treasury tx ${tx.id} sent after its first broadcast failed`, { event: "treasury.resent", treasuryTxId: tx.id, txHash: tx.txHash })),
          Effect.catchAll(() => Effect.void),
          // A statement interrupted in flight could cancel the next one another fiber runs on its connection.
          Effect.uninterruptible
        )
      )
    )

  return { broadcast, broadcastFirst, resendUntilSent } as const
}
