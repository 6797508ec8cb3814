// A lean JSON-RPC client for the paid call's hot reads: several calls as one JSON-RPC batch in one HTTP request over a
// keep-alive undici pool (no fetch, no Response, no web streams). Measured against a local anvil: two reads through
// viem's http transport (withRetry/withTimeout/dedupe around undici fetch, one request each) ~0.8 ms CPU, both as one
// batch here ~0.05-0.13 ms. It keeps the chain transport's bounds (layers/Chain.ts, docs/decisions/chain-transport-and-faults.md "RPC faults"):
// each try at most `timeoutMs` (headers and body), on an RPC 2 retries of timeouts, network errors, 403/408/413/429/5xx and
// the JSON-RPC codes viem retries, backoff 250 ms then 500 ms or a provider's Retry-After of at most 2 s; a devnet
// does not retry. Answers are bounded in size. A provider that does not take batches answers with something that is not
// an array: `BatchRefused`, and the caller reads one call at a time through viem instead.
import { Pool } from "undici"

export interface RpcCall {
  readonly method: string
  readonly params: ReadonlyArray<unknown>
}

/** The provider answered, but not with one answer per call of the batch (it does not take batches). */
export class BatchRefused extends Error {
  override readonly name = "BatchRefused"
}

/** A call of the batch failed (its JSON-RPC error), or the request did (HTTP status, timeout, network). */
export class RpcBatchError extends Error {
  override readonly name = "RpcBatchError"
}

export interface RpcBatchBounds {
  readonly timeoutMs: number
  readonly retries: number
  readonly retryDelayMs: number
  readonly maxRetryAfterSeconds: number
  /** Largest answer read, in bytes. */
  readonly maxResponseBytes?: number
}

/** HTTP statuses viem's transport retries. */
export const RETRIED_STATUSES = new Set([403, 408, 413, 429, 500, 502, 503, 504])
/** JSON-RPC error codes viem's transport retries (internal error, limit exceeded, rate limits, unknown). */
const RETRIED_CODES = new Set([-32603, -32005, 429, -32007, -1])
const DEFAULT_MAX_RESPONSE_BYTES = 1_048_576

class Retryable extends Error {
  constructor(message: string, readonly retryAfterMs?: number) {
    super(message)
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface RpcAnswer {
  readonly id?: unknown
  readonly result?: unknown
  readonly error?: { readonly code?: unknown; readonly message?: unknown }
}

const isAnswer = (x: unknown): x is RpcAnswer => typeof x === "object" && x !== null

/** One HTTP answer of the RPC, read whole within the try's bound. */
export interface RpcHttpAnswer {
  readonly status: number
  readonly contentType: string | undefined
  readonly retryAfter: string | undefined
  readonly text: string
}

/** The try did not complete: no answer within the bound, or the connection failed. */
export class RpcUnreachable extends Error {
  override readonly name = "RpcUnreachable"
  constructor(message: string, readonly timedOut: boolean) {
    super(message)
  }
}

const header = (value: string | ReadonlyArray<string> | undefined) => (typeof value === "string" ? value : value?.[0])

/**
 * POSTs a JSON body to `rpcUrl` over a keep-alive pool: one try, bounded in time (headers and body) and in size. Throws
 * `RpcUnreachable` (timeout, network) or `RpcBatchError` (an answer past the size bound).
 */
export const makeRpcPost = (rpcUrl: string, bounds: Pick<RpcBatchBounds, "timeoutMs" | "maxResponseBytes">) => {
  const url = new URL(rpcUrl)
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (url.username !== "") {
    headers["authorization"] = `Basic ${btoa(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`)}`
  }
  const path = `${url.pathname}${url.search}`
  const pool = new Pool(url.origin, { connections: 32, keepAliveTimeout: 4_000, pipelining: 1 })
  const maxBytes = bounds.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  const post = async (body: string): Promise<RpcHttpAnswer> => {
    const signal = AbortSignal.timeout(bounds.timeoutMs)
    try {
      const answer = await pool.request({ path, method: "POST", headers, body, signal, headersTimeout: bounds.timeoutMs, bodyTimeout: bounds.timeoutMs })
      let size = 0
      const chunks: Array<Buffer> = []
      for await (const chunk of answer.body) {
        const bytes = chunk as Buffer
        size += bytes.length
        if (size > maxBytes) {
          answer.body.destroy()
          throw new RpcBatchError(`the RPC answer is larger than ${maxBytes} bytes`)
        }
        chunks.push(bytes)
      }
      return {
        status: answer.statusCode,
        contentType: header(answer.headers["content-type"]),
        retryAfter: header(answer.headers["retry-after"]),
        text: chunks.length === 1 && chunks[0] !== undefined ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8")
      }
    } catch (error) {
      if (error instanceof RpcBatchError) throw error
      throw signal.aborted
        ? new RpcUnreachable(`the RPC did not answer within ${bounds.timeoutMs} ms`, true)
        : new RpcUnreachable(`the RPC request failed: ${String(error)}`, false)
    }
  }
  return { post, close: () => pool.close() } as const
}

/** Sends `calls` as one batch to `rpcUrl`; resolves with each call's `result`, in the order of `calls`. */
export const makeRpcBatch = (rpcUrl: string, bounds: RpcBatchBounds) => {
  const { post, close } = makeRpcPost(rpcUrl, bounds)
  let nextId = 1

  const once = async (calls: ReadonlyArray<RpcCall>): Promise<ReadonlyArray<unknown>> => {
    const first = nextId
    nextId += calls.length
    if (nextId > 1e9) nextId = 1
    const body = JSON.stringify(calls.map((c, i) => ({ jsonrpc: "2.0", id: first + i, method: c.method, params: c.params })))
    let answer: RpcHttpAnswer
    try {
      answer = await post(body)
    } catch (error) {
      if (error instanceof RpcUnreachable) throw new Retryable(error.message)
      throw error
    }
    const { status, text, retryAfter } = answer
    if (status < 200 || status > 299) {
      const message = `the RPC answered HTTP ${status}: ${text.slice(0, 200)}`
      if (!RETRIED_STATUSES.has(status)) throw new RpcBatchError(message)
      const seconds = retryAfter === undefined ? Number.NaN : Number.parseInt(retryAfter, 10)
      throw new Retryable(message, Number.isNaN(seconds) ? undefined : Math.min(seconds, bounds.maxRetryAfterSeconds) * 1000)
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      throw new RpcBatchError(`the RPC answered something that is not JSON: ${text.slice(0, 200)}`)
    }
    if (!Array.isArray(parsed)) {
      // A provider refusing the batch answers one error: a rate limit is retried, anything else means no batches.
      const code = isAnswer(parsed) && isAnswer(parsed.error) ? parsed.error.code : undefined
      if (typeof code === "number" && RETRIED_CODES.has(code)) throw new Retryable(`the RPC answered error ${code}`)
      throw new BatchRefused(`the RPC did not answer the batch with a list: ${text.slice(0, 200)}`)
    }
    const byId = new Map<unknown, RpcAnswer>()
    for (const item of parsed) if (isAnswer(item)) byId.set(item.id, item)
    return calls.map((c, i) => {
      const item = byId.get(first + i)
      if (item === undefined) throw new BatchRefused(`the RPC's answer to the batch has no answer to ${c.method}`)
      if (item.error !== undefined) {
        const code = item.error.code
        const message = `${c.method}: RPC error ${String(code)} ${String(item.error.message).slice(0, 200)}`
        if (typeof code === "number" && RETRIED_CODES.has(code)) throw new Retryable(message)
        throw new RpcBatchError(message)
      }
      return item.result
    })
  }

  const batch = async (calls: ReadonlyArray<RpcCall>): Promise<ReadonlyArray<unknown>> => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await once(calls)
      } catch (error) {
        if (!(error instanceof Retryable)) throw error
        if (attempt >= bounds.retries) throw new RpcBatchError(error.message)
        await sleep(error.retryAfterMs ?? (1 << attempt) * bounds.retryDelayMs)
      }
    }
  }

  return { batch, close } as const
}

export type RpcBatch = ReturnType<typeof makeRpcBatch>
