// One HTTP exchange with an agent over the guarded pool: the signed POST with its deadline, capped body and failure classification; the health probe.
import type { Agent } from "undici"
import { request } from "undici"
import { abandon, readCapped } from "./body.js"
import { AgentCallError, type AgentFailureKind, CallInterrupted, causes, errorCode } from "./errors.js"
import { BlockedAddressError } from "./Pool.js"

export interface AgentReply {
  readonly status: number
  /** Always a JSON object (not an array, not null). */
  readonly body: unknown
  readonly durationMs: number
  /** The agent's usage report for a metered capability (`X-Usage-Units` response header), as sent. */
  readonly usageUnits?: string
}

/** A request ready to send: URL, signed headers and body, its deadline, and when the call started (performance.now()). */
export interface Prepared {
  readonly url: string
  readonly requestId: string
  readonly headers: Record<string, string>
  readonly rawBody: string
  readonly timeoutMs: number
  readonly started: number
}

export const USER_AGENT = "agent-marketplace/1.0"

const MAX_ERROR_SNIPPET_BYTES = 8 * 1024
const TIMED_OUT = Symbol("timed out")
const INTERRUPTED = Symbol("interrupted")

export const failure = (kind: AgentFailureKind, message: string, started: number, status?: number) =>
  new AgentCallError({
    kind,
    message,
    durationMs: Math.round(performance.now() - started),
    ...(status !== undefined ? { status } : {})
  })

export const makeExchange = (dispatcher: Agent, responseMaxBytes: number) => {
  const classify = (error: unknown, signal: AbortSignal, p: Prepared): Error => {
    if (signal.aborted && signal.reason === INTERRUPTED) return new CallInterrupted("the caller went away")
    if (signal.aborted && signal.reason === TIMED_OUT) {
      return failure("timeout", `agent did not answer within ${p.timeoutMs} ms`, p.started)
    }
    for (const e of causes(error)) {
      if (e instanceof AgentCallError) return e
      if (e instanceof BlockedAddressError) return failure("blocked_url", e.message, p.started)
      const code = errorCode(e)
      if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") {
        return failure("timeout", `agent did not answer within ${p.timeoutMs} ms`, p.started)
      }
      if (code === "UND_ERR_RES_EXCEEDED_MAX_SIZE") {
        return failure("too_large", `agent response is larger than ${responseMaxBytes} bytes`, p.started)
      }
    }
    const code = errorCode(error)
    const detail = error instanceof Error ? error.message : String(error)
    return failure("connection", `could not reach the agent${code !== undefined ? ` (${code})` : ""}: ${detail}`, p.started)
  }

  /** The breaker's action: one HTTP exchange, rejecting with an AgentCallError (or CallInterrupted). */
  const perform = async (p: Prepared, outer: AbortSignal): Promise<AgentReply> => {
    const controller = new AbortController()
    const onOuterAbort = () => controller.abort(INTERRUPTED)
    if (outer.aborted) onOuterAbort()
    else outer.addEventListener("abort", onOuterAbort, { once: true })
    const timer = setTimeout(() => controller.abort(TIMED_OUT), p.timeoutMs)
    try {
      const response = await request(p.url, {
        dispatcher,
        method: "POST",
        headers: p.headers,
        body: p.rawBody,
        signal: controller.signal,
        headersTimeout: p.timeoutMs,
        bodyTimeout: p.timeoutMs
      })
      const { statusCode, headers, body } = response
      if (statusCode >= 300 && statusCode < 400) {
        // Small bodies are read off so the keep-alive socket can be reused; bigger ones drop it.
        await body.dump({ limit: 16 * 1024 })
        const location = headers["location"]
        throw failure(
          "redirect",
          `agent answered HTTP ${statusCode}${typeof location === "string" ? ` to ${location}` : ""}; redirects are not followed`,
          p.started,
          statusCode
        )
      }
      if (statusCode < 200 || statusCode >= 300) {
        const { bytes } = await readCapped(body, Math.min(MAX_ERROR_SNIPPET_BYTES, responseMaxBytes))
        const snippet = bytes.toString("utf8").slice(0, 500)
        throw failure("http_status", `agent answered HTTP ${statusCode}${snippet.length > 0 ? `: ${snippet}` : ""}`, p.started, statusCode)
      }
      const declared = Number(headers["content-length"])
      if (Number.isFinite(declared) && declared > responseMaxBytes) {
        abandon(body)
        throw failure("too_large", `agent response is larger than ${responseMaxBytes} bytes (content-length ${declared})`, p.started)
      }
      const { bytes, truncated } = await readCapped(body, responseMaxBytes)
      if (truncated) throw failure("too_large", `agent response is larger than ${responseMaxBytes} bytes`, p.started)
      let parsed: unknown
      try {
        parsed = JSON.parse(bytes.toString("utf8"))
      } catch {
        throw failure("invalid_json", "agent response is not valid JSON", p.started)
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        throw failure("invalid_json", "agent response is not a JSON object", p.started)
      }
      const usage = headers["x-usage-units"]
      const usageUnits = Array.isArray(usage) ? usage[0] : usage
      return { status: statusCode, body: parsed, durationMs: Math.round(performance.now() - p.started), ...(usageUnits === undefined ? {} : { usageUnits }) }
    } catch (error) {
      throw classify(error, controller.signal, p)
    } finally {
      clearTimeout(timer)
      outer.removeEventListener("abort", onOuterAbort)
    }
  }

  /** GET the health URL; true on a 2xx within the deadline. Rejects on any failure. */
  const probe = async (url: string, timeoutMs: number, outer: AbortSignal): Promise<boolean> => {
    const controller = new AbortController()
    const onOuterAbort = () => controller.abort(INTERRUPTED)
    outer.addEventListener("abort", onOuterAbort, { once: true })
    const timer = setTimeout(() => controller.abort(TIMED_OUT), timeoutMs)
    try {
      const { statusCode, body } = await request(url, {
        dispatcher,
        method: "GET",
        headers: { "user-agent": USER_AGENT, accept: "application/json" },
        signal: controller.signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs
      })
      await body.dump({ limit: 64 * 1024 })
      return statusCode >= 200 && statusCode < 300
    } finally {
      clearTimeout(timer)
      outer.removeEventListener("abort", onOuterAbort)
    }
  }

  return { perform, probe } as const
}
