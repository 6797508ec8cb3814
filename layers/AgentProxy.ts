// Calls agents' execution endpoints: signed requests over the guarded pool, each agent behind its own breaker; the parts live in layers/outbound/.
import { Effect } from "effect"
import { isIP } from "node:net"
import CircuitBreaker from "opossum"
import { AppConfig } from "./Config.js"
import { makeBreakers } from "./outbound/breakers.js"
import { AgentCallError, errorCode } from "./outbound/errors.js"
import { type AgentReply, failure, makeExchange, type Prepared, USER_AGENT } from "./outbound/exchange.js"
import { OutboundPool } from "./outbound/Pool.js"
import { outboundSettings } from "./outbound/settings.js"
import { loadRequestSigner } from "./outbound/signing.js"
import { outboundTraceparent } from "./outbound/trace.js"
import { addressRefusal, hostOf } from "./UrlGuard.js"
import { withSpan } from "./observability/span.js"

export { BREAKER_OPTIONS, type BreakerChange } from "./outbound/breakers.js"
export { AgentCallError, type AgentFailureKind } from "./outbound/errors.js"
export { type AgentReply, USER_AGENT } from "./outbound/exchange.js"
export { DEFAULT_AGENT_RESPONSE_MAX_BYTES, DEFAULT_CIRCUIT_RESET_TIMEOUT_MS, DEFAULT_EXECUTION_TIMEOUT_MS } from "./outbound/settings.js"
export { SIGNATURE_MAX_AGE_MS, SigningKeyError, type SigningKeyInfo, signedPayload } from "./outbound/signing.js"

export interface AgentCall {
  /** The breaker key. */
  readonly agentId: string
  /** The agent's `endpoints.execution`. */
  readonly url: string
  readonly requestId: string
  readonly capabilityId: string
  readonly input: unknown
  /** W3C trace context (a chain's); our own span replaces it within the trace we record (layers/outbound/trace.ts). */
  readonly traceparent?: string
  /** Defaults to EXECUTION_TIMEOUT_MS. Covers connect, headers and the whole body. */
  readonly timeoutMs?: number
  /** Sent as X-Chain-Token to an agent that may hire others inside a chain (docs/chains.md). */
  readonly chainToken?: string
  /** A dynamic capability's quote request (`"quote": true` in the signed body): the agent prices the input, does no work. */
  readonly quote?: boolean
}

export const DEFAULT_PROBE_TIMEOUT_MS = 5_000

export class AgentProxy extends Effect.Service<AgentProxy>()("AgentProxy", {
  scoped: Effect.gen(function* () {
    const { allowPrivateUrls, chainMode, dataDir } = yield* AppConfig
    const { executionTimeoutMs, responseMaxBytes, resetTimeout } = yield* outboundSettings
    const signer = yield* loadRequestSigner({ chainMode, dataDir })
    const { dispatcher } = yield* OutboundPool
    const exchange = makeExchange(dispatcher, responseMaxBytes)
    const breakers = yield* makeBreakers(exchange.perform, resetTimeout)

    /** Refusals decided from the URL alone, before the breaker: they never reach (or count against) the agent. */
    const checkUrl = (raw: string): string | undefined => {
      let url: URL
      try {
        url = new URL(raw)
      } catch {
        return "agent URL is not a valid URL"
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") return "only http and https agent URLs are allowed"
      const host = hostOf(url)
      const why = allowPrivateUrls || isIP(host) === 0 ? undefined : addressRefusal(host)
      if (why !== undefined) return `agent URL points to a private or reserved address (${host}, ${why}); set ALLOW_PRIVATE_URLS=true to allow`
      return undefined
    }

    const call = (c: AgentCall): Effect.Effect<AgentReply, AgentCallError> =>
      Effect.gen(function* () {
        const started = performance.now()
        const refused = checkUrl(c.url)
        if (refused !== undefined) return yield* failure("blocked_url", refused, started)
        const traceparent = yield* outboundTraceparent(c.traceparent)
        const rawBody = yield* Effect.try(() => JSON.stringify({ requestId: c.requestId, capabilityId: c.capabilityId, input: c.input, ...(c.quote === true ? { quote: true } : {}) })).pipe(
          Effect.orDie
        )
        const timestampMs = Date.now()
        const prepared: Prepared = {
          url: c.url,
          requestId: c.requestId,
          rawBody,
          timeoutMs: Math.max(1, c.timeoutMs ?? executionTimeoutMs),
          started,
          headers: {
            "content-type": "application/json",
            accept: "application/json",
            "user-agent": USER_AGENT,
            "x-request-id": c.requestId,
            traceparent,
            ...(c.chainToken === undefined ? {} : { "x-chain-token": c.chainToken }),
            "x-marketplace-timestamp": String(timestampMs),
            "x-marketplace-key-id": signer.info.keyId,
            "x-marketplace-signature": `ed25519=${signer.sign(timestampMs, c.requestId, rawBody)}`
          }
        }
        const breaker = breakers.breakerFor(c.agentId)
        return yield* Effect.tryPromise({
          try: (signal) => breaker.fire(prepared, signal),
          catch: (error): AgentCallError => {
            if (error instanceof AgentCallError) return error
            if (error instanceof Error && CircuitBreaker.isOurError(error)) {
              return errorCode(error) === "EOPENBREAKER"
                ? failure("circuit_open", `circuit for agent ${c.agentId} is open; not calling it`, started)
                : failure("circuit_open", "the agent proxy is shut down", started)
            }
            return failure("connection", `agent call failed: ${String(error)}`, started)
          }
        })
      }).pipe(
        Effect.tapError((e) => Effect.annotateCurrentSpan({ "agent.failure": e.kind })),
        withSpan("AgentProxy.call", { attributes: { "agent.id": c.agentId, "request.id": c.requestId } })
      )

    const probe = (url: string, timeoutMs: number = DEFAULT_PROBE_TIMEOUT_MS): Effect.Effect<boolean> =>
      checkUrl(url) !== undefined
        ? Effect.succeed(false)
        : Effect.tryPromise((signal) => exchange.probe(url, timeoutMs, signal)).pipe(
          // A probe answers a yes/no question: any failure (refused, reset, timeout, blocked) is "not healthy".
          Effect.orElseSucceed(() => false),
          withSpan("AgentProxy.probe", { attributes: { url } })
        )

    return { call, probe, breakerChanges: breakers.changes, isOpen: breakers.isOpen, signingKey: signer.info, signBytes: signer.signBytes } as const
  }),
  dependencies: [OutboundPool.Default]
}) {}
