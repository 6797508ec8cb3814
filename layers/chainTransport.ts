// The chain's transport and its bounds (docs/decisions/chain-transport-and-faults.md): every chain call's
// timeout, retries and Retry-After cap, over a keep-alive pool (or viem's fetch transport with CHAIN_TRANSPORT=fetch),
// and the lean JSON-RPC batch client under the same bounds.
import { http } from "viem"
import { poolTransport } from "./poolTransport.js"
import { makeRpcBatch } from "./rpcBatch.js"

/** Receipt polling: anvil mines at once, real chains need a slower poll. */
// 250 ms on an RPC: a paid call answers after its receipt, and a 1 s poll added 0.4-1.7 s to each answer at 2 s blocks
// (docs/performance.md); one eth_blockNumber per 250 ms is little for a provider.
export const pollingIntervalFor = (mode: "devnet" | "rpc") => (mode === "devnet" ? 20 : 250)

/**
 * Bounds of every call through the chain's transport (docs/decisions/chain-transport-and-faults.md "RPC faults"). On an RPC: each try at most
 * `CHAIN_RPC_TIMEOUT_MS` (default 2.5 s), 2 retries of 429/5xx/timeouts with backoff 250 ms then 500 ms, a provider's
 * Retry-After honoured up to 2 s: one call ends within 3 × 2.5 + 2 × 2 = 11.5 s at worst. The devnet (a local anvil)
 * does not retry and gives each call 10 s.
 */
export const RPC_DEFAULT_TIMEOUT_MS = 2_500
export const RPC_RETRY_COUNT = 2
export const RPC_RETRY_DELAY_MS = 250
export const RPC_MAX_RETRY_AFTER_SECONDS = 2
const DEVNET_TIMEOUT_MS = 10_000

/**
 * fetch whose answers carry a Retry-After of at most RPC_MAX_RETRY_AFTER_SECONDS: viem waits whatever a provider asks
 * before its retry, and a provider asking for a minute would hold a request past every bound.
 */
const cappedRetryAfter: typeof fetch = async (input, init) => {
  const answer = await fetch(input, init)
  const asked = answer.headers.get("retry-after")
  if (asked === null) return answer
  const seconds = Number.parseInt(asked, 10)
  if (!Number.isNaN(seconds) && seconds <= RPC_MAX_RETRY_AFTER_SECONDS) return answer
  const headers = new Headers(answer.headers)
  headers.set("retry-after", String(RPC_MAX_RETRY_AFTER_SECONDS))
  return new Response(answer.body, { status: answer.status, statusText: answer.statusText, headers })
}

/**
 * The transport every chain call goes through, bounded as above: viem's requests over a keep-alive undici pool
 * (layers/poolTransport.ts: the same errors and retries, ~0.3 ms less CPU per call than undici's fetch), or viem's own
 * `http` over fetch with CHAIN_TRANSPORT=fetch.
 */
/** The bounds above for one mode: what the transport and the batch client both apply. */
const boundsFor = (mode: "devnet" | "rpc", timeoutMs: number) =>
  mode === "devnet"
    ? { timeoutMs: DEVNET_TIMEOUT_MS, retryCount: 0, retryDelayMs: RPC_RETRY_DELAY_MS, maxRetryAfterSeconds: RPC_MAX_RETRY_AFTER_SECONDS }
    : { timeoutMs, retryCount: RPC_RETRY_COUNT, retryDelayMs: RPC_RETRY_DELAY_MS, maxRetryAfterSeconds: RPC_MAX_RETRY_AFTER_SECONDS }

export const boundedTransport = (mode: "devnet" | "rpc", rpcUrl: string, timeoutMs = RPC_DEFAULT_TIMEOUT_MS) => {
  const bounds = boundsFor(mode, timeoutMs)
  if (process.env["CHAIN_TRANSPORT"] !== "fetch") return poolTransport(rpcUrl, bounds)
  return http(rpcUrl, {
    batch: false,
    retryCount: bounds.retryCount,
    retryDelay: bounds.retryDelayMs,
    timeout: bounds.timeoutMs,
    ...(mode === "rpc" ? { fetchFn: cappedRetryAfter } : {})
  })
}

/** The lean batch client under the same bounds as `boundedTransport`. */
export const batchClient = (mode: "devnet" | "rpc", rpcUrl: string, timeoutMs = RPC_DEFAULT_TIMEOUT_MS) => {
  const { retryCount, ...bounds } = boundsFor(mode, timeoutMs)
  return makeRpcBatch(rpcUrl, { ...bounds, retries: retryCount })
}
