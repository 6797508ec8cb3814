// Calls agents' execution endpoints: one pooled undici client, private addresses refused at connect time, Ed25519-signed requests, an opossum breaker per agent.
import { Config, ConfigError, Data, Effect, Option, PubSub, Redacted } from "effect"
import * as crypto from "node:crypto"
import * as dns from "node:dns"
import { EventEmitter } from "node:events"
import * as fs from "node:fs/promises"
import type * as net from "node:net"
import { isIP } from "node:net"
import * as path from "node:path"
import CircuitBreaker from "opossum"
import { Agent, request } from "undici"
import { AppConfig } from "./Config.js"
import { isPrivateAddress } from "./UrlGuard.js"

export interface AgentCall {
  /** The breaker key. */
  readonly agentId: string
  /** The agent's `endpoints.execution`. */
  readonly url: string
  readonly requestId: string
  readonly capabilityId: string
  readonly input: unknown
  /** W3C trace context; a fresh one (from the current span) when absent or malformed. */
  readonly traceparent?: string
  /** Defaults to EXECUTION_TIMEOUT_MS. Covers connect, headers and the whole body. */
  readonly timeoutMs?: number
}

export interface AgentReply {
  readonly status: number
  /** Always a JSON object (not an array, not null). */
  readonly body: unknown
  readonly durationMs: number
}

export type AgentFailureKind =
  | "timeout"
  | "connection"
  | "http_status"
  | "invalid_json"
  | "too_large"
  | "blocked_url"
  | "redirect"
  | "circuit_open"

export class AgentCallError extends Data.TaggedError("AgentCallError")<{
  readonly kind: AgentFailureKind
  readonly message: string
  readonly status?: number
  readonly durationMs: number
}> {}

export interface BreakerChange {
  readonly agentId: string
  readonly state: "open" | "half-open" | "closed"
  /** Date.now() when opossum changed state. */
  readonly at: number
}

export interface SigningKeyInfo {
  /** First 16 hex characters of sha256 over the SPKI DER public key. */
  readonly keyId: string
  readonly publicKeyPem: string
  readonly algorithm: "Ed25519"
}

export class SigningKeyError extends Data.TaggedError("SigningKeyError")<{ readonly message: string }> {}

/**
 * opossum settings shared by every agent's breaker. It opens when, within the rolling 60 s window, at least
 * `volumeThreshold` calls were made and the failure rate is strictly above `errorThresholdPercentage`
 * (opossum compares with `>`: exactly 50% keeps it closed). `resetTimeout` comes from CIRCUIT_RESET_TIMEOUT_MS.
 */
export const BREAKER_OPTIONS = {
  timeout: false,
  errorThresholdPercentage: 50,
  volumeThreshold: 5,
  rollingCountTimeout: 60_000,
  rollingCountBuckets: 10
} as const

export const DEFAULT_EXECUTION_TIMEOUT_MS = 30_000
export const DEFAULT_AGENT_RESPONSE_MAX_BYTES = 1024 * 1024
export const DEFAULT_CIRCUIT_RESET_TIMEOUT_MS = 30_000
export const DEFAULT_PROBE_TIMEOUT_MS = 5_000
export const USER_AGENT = "agent-marketplace/1.0"
/** Agents should refuse signed requests older than this (documented in docs/agent-requests.md). */
export const SIGNATURE_MAX_AGE_MS = 5 * 60_000

/** The bytes an agent verifies: `${timestampMs}.${requestId}.${rawBody}`. */
export const signedPayload = (timestampMs: number | string, requestId: string, rawBody: string): Buffer =>
  Buffer.from(`${timestampMs}.${requestId}.${rawBody}`, "utf8")

const parsePrivateKey = (text: string): crypto.KeyObject => {
  const trimmed = text.trim()
  const key = trimmed.startsWith("-----BEGIN")
    ? crypto.createPrivateKey({ key: trimmed, format: "pem" })
    : crypto.createPrivateKey({ key: Buffer.from(trimmed, "base64"), format: "der", type: "pkcs8" })
  if (key.asymmetricKeyType !== "ed25519") {
    throw new Error(`expected an Ed25519 key, got ${key.asymmetricKeyType ?? "an unknown key type"}`)
  }
  return key
}

const describeSigningKey = (privateKey: crypto.KeyObject): SigningKeyInfo => {
  const publicKey = crypto.createPublicKey(privateKey)
  const der = publicKey.export({ format: "der", type: "spki" })
  const pem = publicKey.export({ format: "pem", type: "spki" })
  return {
    keyId: crypto.createHash("sha256").update(der).digest("hex").slice(0, 16),
    publicKeyPem: typeof pem === "string" ? pem : pem.toString("utf8"),
    algorithm: "Ed25519"
  }
}

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined

/** Devnet: the key lives in DATA_DIR so agents' pinned public keys survive restarts. Two processes racing agree via `wx`. */
const loadOrCreateDevKey = (file: string) =>
  Effect.tryPromise({
    try: async () => {
      await fs.mkdir(path.dirname(file), { recursive: true })
      const read = async () => parsePrivateKey(await fs.readFile(file, "utf8"))
      try {
        return await read()
      } catch (error) {
        if (errorCode(error) !== "ENOENT") throw error
      }
      const { privateKey } = crypto.generateKeyPairSync("ed25519")
      const pem = privateKey.export({ format: "pem", type: "pkcs8" })
      try {
        await fs.writeFile(file, pem, { mode: 0o600, flag: "wx" })
        return privateKey
      } catch (error) {
        if (errorCode(error) === "EEXIST") return await read()
        throw error
      }
    },
    catch: (error) => new SigningKeyError({ message: `could not load or create the devnet proxy signing key ${file}: ${String(error)}` })
  })

/** Refused by the connect-time lookup; never counted against the agent's breaker. */
class BlockedAddressError extends Error {
  readonly code = "EBLOCKEDADDRESS"
  constructor(readonly hostname: string, readonly address: string) {
    super(`host ${hostname} resolves to a private or reserved address (${address}); set ALLOW_PRIVATE_URLS=true to allow`)
  }
}

/** The caller's fiber was interrupted; not the agent's fault, so not counted by the breaker. */
class CallInterrupted extends Error {}

/**
 * dns.lookup, refusing the connection when any resolved address is private. It runs for every new socket, so a
 * name that resolved to a public address at registration and later rebinds to 127.0.0.1 is still refused.
 */
const guardedLookup: net.LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error !== null) return callback(error, "")
    const bad = addresses.find((a) => isPrivateAddress(a.address))
    if (bad !== undefined) return callback(new BlockedAddressError(hostname, bad.address), "")
    const first = addresses[0]
    if (first === undefined) {
      return callback(Object.assign(new Error(`host ${hostname} has no addresses`), { code: "ENOTFOUND" }), "")
    }
    return options.all === true ? callback(null, addresses) : callback(null, first.address, first.family)
  })
}

const causes = function* (error: unknown): Generator<unknown> {
  let current = error
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    yield current
    current = current instanceof Error ? current.cause : undefined
  }
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/
const validTraceparent = (value: string): boolean => {
  const m = TRACEPARENT.exec(value)
  return m !== null && !/^0+$/.test(m[1] ?? "") && !/^0+$/.test(m[2] ?? "")
}

const MAX_ERROR_SNIPPET_BYTES = 8 * 1024

type BodyStream = AsyncIterable<unknown> & {
  destroy: (error?: Error) => unknown
  on: (event: "error", listener: (error: Error) => void) => unknown
}

/** Drops a body we gave up on. undici reports the abort we cause as an 'error' event; it is expected (its own dump() ignores it too). */
const abandon = (body: BodyStream) => {
  body.on("error", () => undefined)
  body.destroy()
}

/** Reads at most `limit` bytes; past that the stream is destroyed (the connection is dropped, nothing more is buffered). */
const readCapped = async (body: BodyStream, limit: number): Promise<{ readonly bytes: Buffer; readonly truncated: boolean }> => {
  const chunks: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of body) {
    if (!(chunk instanceof Uint8Array)) continue
    if (size + chunk.length > limit) {
      chunks.push(chunk.subarray(0, limit - size))
      abandon(body)
      return { bytes: Buffer.concat(chunks), truncated: true }
    }
    chunks.push(chunk)
    size += chunk.length
  }
  return { bytes: Buffer.concat(chunks, size), truncated: false }
}

interface Prepared {
  readonly url: string
  readonly requestId: string
  readonly headers: Record<string, string>
  readonly rawBody: string
  readonly timeoutMs: number
  readonly started: number
}

const TIMED_OUT = Symbol("timed out")
const INTERRUPTED = Symbol("interrupted")

export class AgentProxy extends Effect.Service<AgentProxy>()("AgentProxy", {
  scoped: Effect.gen(function* () {
    const { allowPrivateUrls, chainMode, dataDir } = yield* AppConfig
    const executionTimeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(
      Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS),
      Config.validate({ message: "EXECUTION_TIMEOUT_MS must be between 1 and 600000", validation: (n) => n >= 1 && n <= 600_000 })
    )
    const responseMaxBytes = yield* Config.integer("AGENT_RESPONSE_MAX_BYTES").pipe(
      Config.withDefault(DEFAULT_AGENT_RESPONSE_MAX_BYTES),
      Config.validate({
        message: "AGENT_RESPONSE_MAX_BYTES must be between 1024 and 268435456",
        validation: (n) => n >= 1024 && n <= 256 * 1024 * 1024
      })
    )
    const resetTimeout = yield* Config.integer("CIRCUIT_RESET_TIMEOUT_MS").pipe(
      Config.withDefault(DEFAULT_CIRCUIT_RESET_TIMEOUT_MS),
      Config.validate({ message: "CIRCUIT_RESET_TIMEOUT_MS must be between 10 and 86400000", validation: (n) => n >= 10 && n <= 86_400_000 })
    )
    const configuredKey = yield* Config.option(Config.redacted("PROXY_SIGNING_KEY"))

    const privateKey = yield* Option.match(configuredKey, {
      onSome: (secret) =>
        Effect.try({
          try: () => parsePrivateKey(Redacted.value(secret)),
          catch: (error) =>
            ConfigError.InvalidData(
              ["PROXY_SIGNING_KEY"],
              `PROXY_SIGNING_KEY must be an Ed25519 private key, PEM (PKCS#8) or base64 of the PKCS#8 DER: ${error instanceof Error ? error.message : String(error)}`
            )
        }),
      onNone: () =>
        chainMode === "devnet"
          ? loadOrCreateDevKey(path.join(dataDir, "proxy-signing-key.pem"))
          : Effect.fail(
            ConfigError.MissingData(
              ["PROXY_SIGNING_KEY"],
              "PROXY_SIGNING_KEY is required outside devnet (an Ed25519 private key, PEM PKCS#8 or base64 DER); agents verify our requests with it"
            )
          )
    })
    const signingKey = describeSigningKey(privateKey)

    const dispatcher = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Agent({
          // Per origin: each agent host gets its own pool of up to 128 keep-alive sockets.
          connections: 128,
          keepAliveTimeout: 10_000,
          keepAliveMaxTimeout: 60_000,
          headersTimeout: executionTimeoutMs,
          bodyTimeout: executionTimeoutMs,
          // Backstop for the streaming cap in readCapped (undici 7 counts body bytes only, not content-length).
          maxResponseSize: responseMaxBytes,
          connect: allowPrivateUrls ? { timeout: 10_000 } : { timeout: 10_000, lookup: guardedLookup }
        })
      ),
      // Let in-flight exchanges end for up to 2 s, then cut them (a plain timer: the TestClock must not hold this up).
      (agent) =>
        Effect.promise(async () => {
          let timer: NodeJS.Timeout | undefined
          await Promise.race([agent.close(), new Promise<void>((resolve) => (timer = setTimeout(resolve, 2_000)))])
          clearTimeout(timer)
          await agent.destroy()
        })
    )

    const breakerChanges = yield* Effect.acquireRelease(PubSub.unbounded<BreakerChange>(), PubSub.shutdown)

    // One timer rotates the statistics buckets of every breaker (opossum would start two intervals per breaker).
    const rotation = new EventEmitter()
    rotation.setMaxListeners(0)
    const breakers = new Map<string, CircuitBreaker<[Prepared, AbortSignal], AgentReply>>()
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const timer = setInterval(
          () => rotation.emit("rotate"),
          Math.floor(BREAKER_OPTIONS.rollingCountTimeout / BREAKER_OPTIONS.rollingCountBuckets)
        )
        timer.unref()
        return timer
      }),
      (timer) =>
        Effect.sync(() => {
          clearInterval(timer)
          for (const breaker of breakers.values()) breaker.shutdown()
          breakers.clear()
        })
    )

    const fail = (kind: AgentFailureKind, message: string, started: number, status?: number) =>
      new AgentCallError({
        kind,
        message,
        durationMs: Math.round(performance.now() - started),
        ...(status !== undefined ? { status } : {})
      })

    const classify = (error: unknown, signal: AbortSignal, p: Prepared): Error => {
      if (signal.aborted && signal.reason === INTERRUPTED) return new CallInterrupted("the caller went away")
      if (signal.aborted && signal.reason === TIMED_OUT) {
        return fail("timeout", `agent did not answer within ${p.timeoutMs} ms`, p.started)
      }
      for (const e of causes(error)) {
        if (e instanceof AgentCallError) return e
        if (e instanceof BlockedAddressError) return fail("blocked_url", e.message, p.started)
        const code = errorCode(e)
        if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") {
          return fail("timeout", `agent did not answer within ${p.timeoutMs} ms`, p.started)
        }
        if (code === "UND_ERR_RES_EXCEEDED_MAX_SIZE") {
          return fail("too_large", `agent response is larger than ${responseMaxBytes} bytes`, p.started)
        }
      }
      const code = errorCode(error)
      const detail = error instanceof Error ? error.message : String(error)
      return fail("connection", `could not reach the agent${code !== undefined ? ` (${code})` : ""}: ${detail}`, p.started)
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
          throw fail(
            "redirect",
            `agent answered HTTP ${statusCode}${typeof location === "string" ? ` to ${location}` : ""}; redirects are not followed`,
            p.started,
            statusCode
          )
        }
        if (statusCode < 200 || statusCode >= 300) {
          const { bytes } = await readCapped(body, Math.min(MAX_ERROR_SNIPPET_BYTES, responseMaxBytes))
          const snippet = bytes.toString("utf8").slice(0, 500)
          throw fail("http_status", `agent answered HTTP ${statusCode}${snippet.length > 0 ? `: ${snippet}` : ""}`, p.started, statusCode)
        }
        const declared = Number(headers["content-length"])
        if (Number.isFinite(declared) && declared > responseMaxBytes) {
          abandon(body)
          throw fail("too_large", `agent response is larger than ${responseMaxBytes} bytes (content-length ${declared})`, p.started)
        }
        const { bytes, truncated } = await readCapped(body, responseMaxBytes)
        if (truncated) throw fail("too_large", `agent response is larger than ${responseMaxBytes} bytes`, p.started)
        let parsed: unknown
        try {
          parsed = JSON.parse(bytes.toString("utf8"))
        } catch {
          throw fail("invalid_json", "agent response is not valid JSON", p.started)
        }
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          throw fail("invalid_json", "agent response is not a JSON object", p.started)
        }
        return { status: statusCode, body: parsed, durationMs: Math.round(performance.now() - p.started) }
      } catch (error) {
        throw classify(error, controller.signal, p)
      } finally {
        clearTimeout(timer)
        outer.removeEventListener("abort", onOuterAbort)
      }
    }

    const breakerFor = (agentId: string) => {
      const existing = breakers.get(agentId)
      if (existing !== undefined) return existing
      const breaker = new CircuitBreaker<[Prepared, AbortSignal], AgentReply>(perform, {
        ...BREAKER_OPTIONS,
        resetTimeout,
        name: agentId,
        rotateBucketController: rotation,
        enableSnapshots: false,
        rollingPercentilesEnabled: false,
        // Policy refusals and callers that went away say nothing about the agent's health. opossum records a
        // filtered error as a success (it has no "neither"), which can also close a half-open breaker.
        errorFilter: (error: unknown) =>
          error instanceof CallInterrupted || (error instanceof AgentCallError && error.kind === "blocked_url")
      })
      const publish = (state: BreakerChange["state"]) => () => void breakerChanges.unsafeOffer({ agentId, state, at: Date.now() })
      breaker.on("open", publish("open"))
      breaker.on("halfOpen", publish("half-open"))
      breaker.on("close", () => {
        publish("closed")()
        // opossum keeps the failures that opened the breaker in its rolling window, so right after a successful
        // half-open trial a single failure would open it again. Like Hystrix, a closed breaker starts afresh:
        // this one retires and the next call creates a new one.
        if (breakers.get(agentId) === breaker) breakers.delete(agentId)
        breaker.shutdown()
      })
      breakers.set(agentId, breaker)
      return breaker
    }

    const sign = (timestampMs: number, requestId: string, rawBody: string) =>
      crypto.sign(null, signedPayload(timestampMs, requestId, rawBody), privateKey).toString("base64")

    /** Refusals decided from the URL alone, before the breaker: they never reach (or count against) the agent. */
    const checkUrl = (raw: string): string | undefined => {
      let url: URL
      try {
        url = new URL(raw)
      } catch {
        return "agent URL is not a valid URL"
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") return "only http and https agent URLs are allowed"
      const host = url.hostname.replace(/^\[|\]$/g, "")
      if (!allowPrivateUrls && isIP(host) !== 0 && isPrivateAddress(host)) {
        return `agent URL points to a private or reserved address (${host}); set ALLOW_PRIVATE_URLS=true to allow`
      }
      return undefined
    }

    const freshTraceparent = Effect.map(Effect.option(Effect.currentSpan), (span) => {
      const candidate = Option.isSome(span) ? `00-${span.value.traceId}-${span.value.spanId}-01` : ""
      return validTraceparent(candidate)
        ? candidate
        : `00-${crypto.randomBytes(16).toString("hex")}-${crypto.randomBytes(8).toString("hex")}-01`
    })

    const call = (c: AgentCall): Effect.Effect<AgentReply, AgentCallError> =>
      Effect.gen(function* () {
        const started = performance.now()
        const refused = checkUrl(c.url)
        if (refused !== undefined) return yield* fail("blocked_url", refused, started)
        const traceparent = c.traceparent !== undefined && validTraceparent(c.traceparent) ? c.traceparent : yield* freshTraceparent
        const rawBody = yield* Effect.try(() => JSON.stringify({ requestId: c.requestId, capabilityId: c.capabilityId, input: c.input })).pipe(
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
            "x-marketplace-timestamp": String(timestampMs),
            "x-marketplace-key-id": signingKey.keyId,
            "x-marketplace-signature": `ed25519=${sign(timestampMs, c.requestId, rawBody)}`
          }
        }
        const breaker = breakerFor(c.agentId)
        return yield* Effect.tryPromise({
          try: (signal) => breaker.fire(prepared, signal),
          catch: (error): AgentCallError => {
            if (error instanceof AgentCallError) return error
            if (error instanceof Error && CircuitBreaker.isOurError(error)) {
              return errorCode(error) === "EOPENBREAKER"
                ? fail("circuit_open", `circuit for agent ${c.agentId} is open; not calling it`, started)
                : fail("circuit_open", "the agent proxy is shut down", started)
            }
            return fail("connection", `agent call failed: ${String(error)}`, started)
          }
        })
      }).pipe(
        Effect.tapError((e) => Effect.annotateCurrentSpan({ "agent.failure": e.kind })),
        Effect.withSpan("AgentProxy.call", { attributes: { "agent.id": c.agentId, "request.id": c.requestId } })
      )

    const probe = (url: string, timeoutMs: number = DEFAULT_PROBE_TIMEOUT_MS): Effect.Effect<boolean> =>
      checkUrl(url) !== undefined
        ? Effect.succeed(false)
        : Effect.tryPromise(async (outer) => {
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
        }).pipe(
          // A probe answers a yes/no question: any failure (refused, reset, timeout, blocked) is "not healthy".
          Effect.orElseSucceed(() => false),
          Effect.withSpan("AgentProxy.probe", { attributes: { url } })
        )

    const isOpen = (agentId: string): boolean => breakers.get(agentId)?.opened === true

    return { call, probe, breakerChanges, isOpen, signingKey } as const
  })
}) {}
