// viem's chain transport over a keep-alive undici pool (layers/rpcBatch.ts `makeRpcPost`) instead of undici's fetch:
// the same JSON-RPC requests, the same error classes as viem's `http` transport (HttpRequestError with the status and
// headers, RpcRequestError, TimeoutError), so viem's retry policy, its error mapping and every caller's handling stay
// as they are; only the request itself is cheaper (no Request/Response/Headers objects, no web streams).
import { custom, HttpRequestError, RpcRequestError, stringify, TimeoutError } from "viem"
import { makeRpcPost, RpcUnreachable } from "./rpcBatch.js"

interface RpcErrorBody {
  readonly error: { readonly code: number; readonly message: string; readonly data?: unknown }
}

const isRpcError = (data: unknown): data is RpcErrorBody => {
  if (typeof data !== "object" || data === null || !("error" in data)) return false
  const error: unknown = data.error
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "number" && "message" in error && typeof error.message === "string"
}

/**
 * `http(rpcUrl, { retryCount, retryDelay, timeout })` with the pool underneath. A Retry-After the RPC sends is capped
 * at `maxRetryAfterSeconds` (viem waits whatever a provider asks before its retry).
 */
export const poolTransport = (rpcUrl: string, config: {
  readonly timeoutMs: number
  readonly retryCount: number
  readonly retryDelayMs: number
  readonly maxRetryAfterSeconds: number
}) => {
  const { post } = makeRpcPost(rpcUrl, { timeoutMs: config.timeoutMs, maxResponseBytes: 10_485_760 })
  const url = new URL(rpcUrl)
  url.username = ""
  url.password = ""
  const shownUrl = url.toString()
  let nextId = 1
  const headersOf = (retryAfter: string | undefined) => {
    const headers = new Headers()
    if (retryAfter === undefined) return headers
    const seconds = Number.parseInt(retryAfter, 10)
    headers.set("retry-after", !Number.isNaN(seconds) && seconds <= config.maxRetryAfterSeconds ? retryAfter : String(config.maxRetryAfterSeconds))
    return headers
  }
  const request = async ({ method, params }: { readonly method: string; readonly params?: unknown }): Promise<unknown> => {
    const body = { jsonrpc: "2.0", id: nextId++, method, params }
    if (nextId > 1e9) nextId = 1
    let answer
    try {
      answer = await post(stringify(body))
    } catch (error) {
      if (error instanceof RpcUnreachable && error.timedOut) throw new TimeoutError({ body, url: shownUrl })
      throw new HttpRequestError({ body, cause: error instanceof Error ? error : new Error(String(error)), url: shownUrl })
    }
    let data: unknown
    try {
      data = JSON.parse(answer.text === "" ? "{}" : answer.text)
    } catch (error) {
      if (answer.status >= 200 && answer.status <= 299) throw new HttpRequestError({ body, cause: error instanceof Error ? error : new Error(String(error)), url: shownUrl })
      data = { error: answer.text }
    }
    if (answer.status < 200 || answer.status > 299) {
      const headers = headersOf(answer.retryAfter)
      if (isRpcError(data)) throw new RpcRequestError({ body, error: data.error, headers, status: answer.status, url: shownUrl })
      const details = typeof data === "object" && data !== null && "error" in data ? stringify(data.error) : undefined
      throw new HttpRequestError({ body, details: details ?? `HTTP ${answer.status}`, headers, status: answer.status, url: shownUrl })
    }
    if (isRpcError(data)) throw new RpcRequestError({ body, error: data.error, url: shownUrl })
    if (typeof data !== "object" || data === null || !("result" in data)) return undefined
    return data.result
  }
  return custom({ request }, { key: "http", name: "HTTP JSON-RPC (pool)", retryCount: config.retryCount, retryDelay: config.retryDelayMs })
}
