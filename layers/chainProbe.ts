// The chain half of /health: one bounded, unretried read of the head, classified as answering, answering badly
// (errors, 429, a head behind one already seen: degraded) or not answering (down).
import { Effect, Ref } from "effect"
import { BaseError, createPublicClient, HttpRequestError, http, RpcRequestError } from "viem"
import type { ChainShape } from "./Chain.js"

/** How long /health waits for the chain's head. */
export const PROBE_TIMEOUT_MS = 1_500
/** A head this many blocks below the highest one this process has seen is stale (a lagging node behind a balancer). */
export const STALE_BLOCKS = 2n

export type ChainProbe =
  | { readonly _tag: "Ok"; readonly blockNumber: bigint }
  /** The RPC answers, but not well: serving continues (retries absorb it), operators are told. */
  | { readonly _tag: "Degraded"; readonly kind: "errors" | "stale"; readonly message: string; readonly blockNumber: bigint | undefined }
  /** Nothing within PROBE_TIMEOUT_MS (or no connection): the process cannot take payments. */
  | { readonly _tag: "Down"; readonly message: string }

/** An answer with an HTTP status or a JSON-RPC error is an answer; a timeout or a refused connection is not. */
export const answeredBadly = (error: unknown): boolean => {
  if (!(error instanceof BaseError)) return false
  return error.walk((e) => (e instanceof HttpRequestError && e.status !== undefined) || e instanceof RpcRequestError) !== null
}

const short = (error: unknown) => (error instanceof BaseError ? error.shortMessage : String(error)).slice(0, 200)

/**
 * A probe of its own (no retries: a retried 429 would read as a slow answer; bounded per try), remembering the highest
 * head it saw: a head that goes back more than STALE_BLOCKS is a stale node. A head that merely stands still is not
 * flagged: an automine devnet and an idle chain make no blocks, and the head's age is not a sound signal without a
 * known block time.
 */
export const makeChainProbe = (chain: ChainShape) =>
  Effect.gen(function* () {
    const client = createPublicClient({
      chain: chain.publicClient.chain,
      transport: http(chain.rpcUrl, { batch: false, retryCount: 0, timeout: PROBE_TIMEOUT_MS })
    })
    const highest = yield* Ref.make(0n)
    return Effect.tryPromise({ try: () => client.getBlockNumber({ cacheTime: 0 }), catch: (error) => error }).pipe(
      Effect.disconnect,
      Effect.timeoutFail({ duration: PROBE_TIMEOUT_MS + 100, onTimeout: () => "timeout" as const }),
      Effect.matchEffect({
        onFailure: (error): Effect.Effect<ChainProbe> =>
          Effect.succeed(
            answeredBadly(error)
              ? { _tag: "Degraded", kind: "errors", message: `the chain RPC answers with errors: ${short(error)}`, blockNumber: undefined }
              : { _tag: "Down", message: error === "timeout" ? `no answer within ${PROBE_TIMEOUT_MS} ms` : short(error) }
          ),
        onSuccess: (blockNumber) =>
          Ref.modify(highest, (seen): [ChainProbe, bigint] =>
            seen - blockNumber > STALE_BLOCKS
              ? [{ _tag: "Degraded", kind: "stale", message: `the chain RPC's head ${blockNumber} is behind block ${seen}, already seen`, blockNumber }, seen]
              : [{ _tag: "Ok", blockNumber }, blockNumber > seen ? blockNumber : seen])
      })
    )
  })
