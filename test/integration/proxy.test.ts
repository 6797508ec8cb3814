// The agent proxy through its real layer against fake agents: forwarded, signed requests, every failure kind, private-address refusal, the opossum breaker, interruption, the signing key's configuration.
import { expect, it, layer } from "@effect/vitest"
import { ConfigError, ConfigProvider, Duration, Effect, Fiber, Layer, Option, PubSub, Queue, type Scope } from "effect"
import * as crypto from "node:crypto"
import { mkdtemp, readdir, rm, stat } from "node:fs/promises"
import type { IncomingHttpHeaders } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type AgentCall, type AgentCallError, AgentProxy, BREAKER_OPTIONS, type BreakerChange } from "../../layers/AgentProxy.js"
import { AppConfig, type AppConfigShape, type ChainMode } from "../../layers/Config.js"
import { testAppConfig } from "../support/config.js"
import { type FakeAgent, fakeAgent, type ReceivedCall } from "../support/agents.js"

const RESET_TIMEOUT_MS = 300

const tempDir = Effect.acquireRelease(
  Effect.promise(() => mkdtemp(join(tmpdir(), "marketplace-proxy-"))),
  (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
)

const appConfig = (dataDir: string, allowPrivateUrls: boolean, chainMode: ChainMode): AppConfigShape =>
  testAppConfig({ dataDir, allowPrivateUrls, chainMode, chainRpcUrl: chainMode === "rpc" ? Option.some("http://127.0.0.1:8545") : Option.none() })

/** The real AgentProxy layer; `settings` are its environment (nothing is read from the process environment). */
const proxyLayer = (options: {
  readonly allowPrivateUrls?: boolean
  readonly chainMode?: ChainMode
  readonly dataDir?: string
  readonly settings?: Record<string, string>
}) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const dataDir = options.dataDir ?? (yield* tempDir)
      return AgentProxy.Default.pipe(
        Layer.provide(Layer.succeed(AppConfig, appConfig(dataDir, options.allowPrivateUrls ?? true, options.chainMode ?? "devnet"))),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(options.settings ?? {})))))
      )
    })
  )

const callTo = (agent: FakeAgent, overrides: Partial<AgentCall> = {}): AgentCall => ({
  agentId: crypto.randomUUID(),
  url: agent.url,
  requestId: `req_${crypto.randomUUID()}`,
  capabilityId: "summarize",
  input: { text: "hello" },
  ...overrides
})

const nth = (calls: ReadonlyArray<ReceivedCall>, i: number): ReceivedCall => {
  const call = calls[i]
  if (call === undefined) throw new Error(`no call ${i} (got ${calls.length})`)
  return call
}

const header = (headers: IncomingHttpHeaders, name: string): string => {
  const value = headers[name]
  if (typeof value !== "string") throw new Error(`header ${name} missing`)
  return value
}

/** The verification snippet of docs/agent-requests.md, verbatim: what an agent owner pastes must accept our requests. */
const MAX_AGE_MS = 5 * 60 * 1000
function checkMarketplaceRequest(
  headers: Record<string, string | string[] | undefined>,
  rawBody: Buffer | string,
  trusted: { readonly keyId: string; readonly key: crypto.KeyObject },
  now: number = Date.now()
): string | undefined {
  const header = (name: string) => {
    const value = headers[name]
    return typeof value === "string" ? value : undefined
  }
  const timestamp = header("x-marketplace-timestamp")
  const requestId = header("x-request-id")
  const keyId = header("x-marketplace-key-id")
  const signature = header("x-marketplace-signature")
  if (!timestamp || !requestId || !keyId || !signature) return "missing signature headers"
  if (keyId !== trusted.keyId) return "signed with another key (fetch the key again)"
  if (!/^\d{1,16}$/.test(timestamp) || Math.abs(now - Number(timestamp)) > MAX_AGE_MS) return "stale timestamp"
  if (!signature.startsWith("ed25519=")) return "unsupported signature scheme"

  const body = typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : rawBody
  const signed = Buffer.concat([Buffer.from(`${timestamp}.${requestId}.`, "utf8"), body])
  const ok = crypto.verify(null, signed, trusted.key, Buffer.from(signature.slice("ed25519=".length), "base64"))
  if (!ok) return "bad signature"

  // The id you act on must be the signed one.
  let parsed: unknown
  try {
    parsed = JSON.parse(body.toString("utf8"))
  } catch {
    return "body is not JSON"
  }
  if (typeof parsed !== "object" || parsed === null || !("requestId" in parsed) || parsed.requestId !== requestId) {
    return "request id in body does not match the signed one"
  }
  return undefined
}

/** The call's failure, with how long the caller waited for it. */
const failureOf = <R>(effect: Effect.Effect<unknown, AgentCallError, R>) =>
  Effect.gen(function* () {
    const started = Date.now()
    const error = yield* Effect.flip(effect)
    return { error, waitedMs: Date.now() - started }
  })

/** Polls a condition on real time (fake agents update their records from socket events). */
const eventually = (condition: () => boolean, timeoutMs = 2_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (!condition()) {
      if (Date.now() > deadline) return yield* Effect.dieMessage(`condition not met within ${timeoutMs} ms`)
      yield* Effect.sleep(Duration.millis(10))
    }
  })

/** The next breaker change for one agent (other tests' breakers share the PubSub). */
const nextChange = (changes: Queue.Dequeue<BreakerChange>, agentId: string) =>
  Effect.gen(function* () {
    for (;;) {
      const change = yield* Queue.take(changes)
      if (change.agentId === agentId) return change
    }
  }).pipe(Effect.timeoutFail({ duration: Duration.seconds(3), onTimeout: () => new Error(`no breaker change for ${agentId}`) }), Effect.orDie)

layer(proxyLayer({ allowPrivateUrls: true, settings: { CIRCUIT_RESET_TIMEOUT_MS: String(RESET_TIMEOUT_MS) } }), {
  excludeTestServices: true
})("agent proxy", (it) => {
  it.scoped("an agent receives a signed JSON POST with the request id and a trace context, and its JSON object comes back", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("echo")
      const c = callTo(agent, { input: { text: "héllo wörld", n: 1 } })
      const reply = yield* proxy.call(c)
      expect(reply.status).toBe(200)
      expect(reply.body).toEqual({ echo: { text: "héllo wörld", n: 1 }, requestId: c.requestId })
      expect(reply.durationMs).toBeGreaterThanOrEqual(0)

      expect(agent.calls).toHaveLength(1)
      const received = nth(agent.calls, 0)
      expect(received.method).toBe("POST")
      expect(received.path).toBe("/execute")
      expect(received.body).toEqual({ requestId: c.requestId, capabilityId: "summarize", input: { text: "héllo wörld", n: 1 } })
      expect(received.headers["content-type"]).toBe("application/json")
      expect(received.headers["user-agent"]).toBe("agent-marketplace/1.0")
      expect(received.headers["x-request-id"]).toBe(c.requestId)
      expect(header(received.headers, "traceparent")).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
      expect(received.headers["x-marketplace-key-id"]).toBe(proxy.signingKey.keyId)
      expect(proxy.signingKey.keyId).toMatch(/^[0-9a-f]{16}$/)
      expect(proxy.signingKey.algorithm).toBe("Ed25519")
      const timestamp = Number(header(received.headers, "x-marketplace-timestamp"))
      expect(Math.abs(Date.now() - timestamp)).toBeLessThan(5_000)

      const trusted = { keyId: proxy.signingKey.keyId, key: crypto.createPublicKey(proxy.signingKey.publicKeyPem) }
      expect(checkMarketplaceRequest(received.headers, received.rawBody, trusted)).toBeUndefined()
      expect(checkMarketplaceRequest(received.headers, Buffer.from(received.rawBody, "utf8"), trusted)).toBeUndefined()
      expect(checkMarketplaceRequest(received.headers, received.rawBody.replace("héllo", "hallo"), trusted)).toBe("bad signature")
      expect(checkMarketplaceRequest({ ...received.headers, "x-marketplace-timestamp": String(timestamp + 1) }, received.rawBody, trusted))
        .toBe("bad signature")
      expect(checkMarketplaceRequest({ ...received.headers, "x-request-id": "req_other" }, received.rawBody, trusted)).toBe("bad signature")
      expect(checkMarketplaceRequest(received.headers, received.rawBody, trusted, timestamp + 5 * 60_000 + 1)).toBe("stale timestamp")
      const otherKey = crypto.createPublicKey(crypto.generateKeyPairSync("ed25519").privateKey)
      expect(checkMarketplaceRequest(received.headers, received.rawBody, { keyId: trusted.keyId, key: otherKey })).toBe("bad signature")
    }))

  it.scoped("a caller's trace context is forwarded as is, a malformed one is replaced", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("echo")
      const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
      yield* proxy.call(callTo(agent, { traceparent }))
      yield* proxy.call(callTo(agent, { traceparent: "not-a-trace" }))
      expect(nth(agent.calls, 0).headers["traceparent"]).toBe(traceparent)
      const replaced = header(nth(agent.calls, 1).headers, "traceparent")
      expect(replaced).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
    }))

  it.scoped("a non-2xx answer fails as http_status with the status and the start of the agent's body", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent({ kind: "json", status: 503, body: { error: "overloaded" } })
      const { error } = yield* failureOf(proxy.call(callTo(agent)))
      expect(error.kind).toBe("http_status")
      expect(error.status).toBe(503)
      expect(error.message).toContain("overloaded")
    }))

  it.scoped("a body that is not JSON, or JSON that is not an object, fails as invalid_json", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("invalid-json")
      expect((yield* failureOf(proxy.call(callTo(agent)))).error.kind).toBe("invalid_json")
      agent.setBehaviour({ kind: "json", status: 200, body: [1, 2, 3] })
      expect((yield* failureOf(proxy.call(callTo(agent)))).error.kind).toBe("invalid_json")
      agent.setBehaviour({ kind: "json", status: 200, body: null })
      expect((yield* failureOf(proxy.call(callTo(agent)))).error.kind).toBe("invalid_json")
    }))

  it.scoped("a 50 MB streamed answer fails fast as too_large, and the agent gets to send only a bounded part of it", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent({ kind: "oversize", bytes: 50 * 1024 * 1024 })
      const { error, waitedMs } = yield* failureOf(proxy.call(callTo(agent)))
      expect(error.kind).toBe("too_large")
      expect(waitedMs).toBeLessThan(2_000)
      const received = nth(agent.calls, 0)
      yield* eventually(() => received.outcome === "aborted")
      // The cap is 1 MiB; what is still in flight is socket buffers, far from the 50 MB on offer.
      expect(received.bytesSent).toBeLessThan(16 * 1024 * 1024)
    }))

  it.scoped("an answer that declares a content-length above the cap fails as too_large before its body is read", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent({ kind: "oversize", bytes: 50 * 1024 * 1024, declareLength: true })
      const { error, waitedMs } = yield* failureOf(proxy.call(callTo(agent)))
      expect(error.kind).toBe("too_large")
      expect(waitedMs).toBeLessThan(2_000)
    }))

  it.scoped("an agent that drops the connection without answering fails as connection", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("close-socket")
      const { error } = yield* failureOf(proxy.call(callTo(agent)))
      expect(error.kind).toBe("connection")
      expect(agent.calls).toHaveLength(1)
    }))

  it.scoped("an agent that dies in the middle of its body fails as connection", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("close-mid-body")
      const { error } = yield* failureOf(proxy.call(callTo(agent)))
      expect(error.kind).toBe("connection")
    }))

  it.scoped("a refused connection fails as connection", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("echo")
      const url = agent.url
      yield* Effect.promise(() => agent.close())
      const { error } = yield* failureOf(proxy.call({ ...callTo(agent), url }))
      expect(error.kind).toBe("connection")
      expect(error.message).toContain("ECONNREFUSED")
    }))

  it.scoped("a slow agent fails as timeout after timeoutMs, long before it would have answered", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent({ kind: "delay", ms: 5_000, then: "echo" })
      const { error, waitedMs } = yield* failureOf(proxy.call(callTo(agent, { timeoutMs: 300 })))
      expect(error.kind).toBe("timeout")
      expect(waitedMs).toBeGreaterThanOrEqual(290)
      expect(waitedMs).toBeLessThan(1_500)
      expect(error.durationMs).toBeGreaterThanOrEqual(290)
      yield* eventually(() => nth(agent.calls, 0).outcome === "aborted")
    }))

  it.scoped("the timeout also covers a body that stalls after the headers", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent({ kind: "stall-body", ms: 5_000 })
      const { error, waitedMs } = yield* failureOf(proxy.call(callTo(agent, { timeoutMs: 300 })))
      expect(error.kind).toBe("timeout")
      expect(waitedMs).toBeLessThan(1_500)
    }))

  it.scoped("a redirect is not followed: it fails as redirect and its target is never called", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const target = yield* fakeAgent("echo")
      const agent = yield* fakeAgent({ kind: "redirect", location: target.url, status: 307 })
      const { error } = yield* failureOf(proxy.call(callTo(agent)))
      expect(error.kind).toBe("redirect")
      expect(error.status).toBe(307)
      expect(error.message).toContain(target.url)
      expect(agent.calls).toHaveLength(1)
      expect(target.calls).toHaveLength(0)
    }))

  it.scoped("five failing calls open the breaker: the next fails fast as circuit_open without reaching the agent, and 'open' is published", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const changes = yield* PubSub.subscribe(proxy.breakerChanges)
      const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "down" } })
      const agentId = crypto.randomUUID()
      expect(BREAKER_OPTIONS.volumeThreshold).toBe(5)
      for (let i = 1; i <= 4; i++) {
        expect((yield* failureOf(proxy.call(callTo(agent, { agentId })))).error.kind).toBe("http_status")
        expect(proxy.isOpen(agentId)).toBe(false)
      }
      expect((yield* failureOf(proxy.call(callTo(agent, { agentId })))).error.kind).toBe("http_status")
      expect(proxy.isOpen(agentId)).toBe(true)
      const opened = yield* nextChange(changes, agentId)
      expect(opened.state).toBe("open")

      const { error, waitedMs } = yield* failureOf(proxy.call(callTo(agent, { agentId })))
      expect(error.kind).toBe("circuit_open")
      expect(waitedMs).toBeLessThan(100)
      expect(agent.calls).toHaveLength(5)
      // Other agents are not affected.
      expect(proxy.isOpen(crypto.randomUUID())).toBe(false)
    }))

  it.scoped("after CIRCUIT_RESET_TIMEOUT_MS the breaker is half-open; one good call closes it with fresh statistics, and both changes are published", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const changes = yield* PubSub.subscribe(proxy.breakerChanges)
      const agent = yield* fakeAgent({ kind: "fail-times", n: 5, then: "echo" })
      const agentId = crypto.randomUUID()
      for (let i = 0; i < 5; i++) yield* Effect.flip(proxy.call(callTo(agent, { agentId })))
      expect((yield* nextChange(changes, agentId)).state).toBe("open")
      const halfOpen = yield* nextChange(changes, agentId)
      expect(halfOpen.state).toBe("half-open")
      expect(proxy.isOpen(agentId)).toBe(false)
      const reply = yield* proxy.call(callTo(agent, { agentId }))
      expect(reply.status).toBe(200)
      expect((yield* nextChange(changes, agentId)).state).toBe("closed")
      expect(agent.calls).toHaveLength(6)

      // A closed breaker starts its statistics afresh: the failures that opened it do not make the next one re-open it.
      agent.setBehaviour({ kind: "json", status: 500, body: {} })
      yield* Effect.flip(proxy.call(callTo(agent, { agentId })))
      expect(proxy.isOpen(agentId)).toBe(false)
      for (let i = 0; i < 4; i++) yield* Effect.flip(proxy.call(callTo(agent, { agentId })))
      expect(proxy.isOpen(agentId)).toBe(true)
    }))

  it.scoped("the breaker opens only above 50% failures: 5 of 10 keeps it closed, the 6th of 11 opens it", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("echo")
      const agentId = crypto.randomUUID()
      for (let i = 0; i < 5; i++) yield* proxy.call(callTo(agent, { agentId }))
      agent.setBehaviour({ kind: "json", status: 500, body: {} })
      for (let i = 0; i < 5; i++) yield* Effect.flip(proxy.call(callTo(agent, { agentId })))
      expect(proxy.isOpen(agentId)).toBe(false)
      yield* Effect.flip(proxy.call(callTo(agent, { agentId })))
      expect(proxy.isOpen(agentId)).toBe(true)
    }))

  it.scoped("interrupting a call aborts the HTTP request, and it does not count against the agent", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent({ kind: "delay", ms: 5_000, then: "echo" })
      const agentId = crypto.randomUUID()
      for (let i = 0; i < 6; i++) {
        const fiber = yield* Effect.fork(proxy.call(callTo(agent, { agentId })))
        const received = yield* Effect.promise(() => agent.waitForCall(i))
        const started = Date.now()
        yield* Fiber.interrupt(fiber)
        yield* eventually(() => received.outcome === "aborted", 1_000)
        expect(Date.now() - started).toBeLessThan(1_000)
      }
      expect(proxy.isOpen(agentId)).toBe(false)
    }))

  it.scoped("probe is true for a 2xx health answer, false for an error status, a slow answer or a dead port", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("echo")
      expect(yield* proxy.probe(agent.healthUrl)).toBe(true)
      agent.setHealth(503)
      expect(yield* proxy.probe(agent.healthUrl)).toBe(false)
      agent.setHealth(200, 3_000)
      const started = Date.now()
      expect(yield* proxy.probe(agent.healthUrl, 200)).toBe(false)
      expect(Date.now() - started).toBeLessThan(1_000)
      expect(agent.healthChecks()).toBe(3)
      const url = agent.healthUrl
      yield* Effect.promise(() => agent.close())
      expect(yield* proxy.probe(url)).toBe(false)
      expect(yield* proxy.probe("not a url")).toBe(false)
    }))
})

layer(proxyLayer({ allowPrivateUrls: false }), { excludeTestServices: true })("agent proxy without ALLOW_PRIVATE_URLS", (it) => {
  const blockedCases = (agent: FakeAgent) => [
    agent.url,
    agent.url.replace("127.0.0.1", "localhost"),
    agent.url.replace("127.0.0.1", "[::ffff:127.0.0.1]"),
    agent.url.replace("127.0.0.1", "2130706433")
  ]

  it.scoped("loopback addresses and names that resolve to them are refused as blocked_url before any request is sent", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("echo")
      for (const url of blockedCases(agent)) {
        const { error } = yield* failureOf(proxy.call(callTo(agent, { url })))
        expect(error.kind, url).toBe("blocked_url")
        // A literal address is named as the client wrote it; a name is only "not allowed", never what it resolved to.
        expect(error.message).toMatch(/private or reserved address|host localhost is not allowed/)
        expect(error.message).not.toMatch(/resolves to/)
      }
      expect(agent.calls).toHaveLength(0)
      expect(yield* proxy.probe(agent.healthUrl)).toBe(false)
      expect(yield* proxy.probe(agent.healthUrl.replace("127.0.0.1", "localhost"))).toBe(false)
      expect(agent.healthChecks()).toBe(0)
    }))

  it.scoped("refusals do not count against the agent's breaker", () =>
    Effect.gen(function* () {
      const proxy = yield* AgentProxy
      const agent = yield* fakeAgent("echo")
      const agentId = crypto.randomUUID()
      const url = agent.url.replace("127.0.0.1", "localhost")
      for (let i = 0; i < 8; i++) {
        expect((yield* failureOf(proxy.call(callTo(agent, { agentId, url })))).error.kind).toBe("blocked_url")
      }
      expect(proxy.isOpen(agentId)).toBe(false)
    }))
})

const signingKeyOf = (options: Parameters<typeof proxyLayer>[0]) =>
  Effect.scoped(Effect.map(AgentProxy, (proxy) => proxy.signingKey).pipe(Effect.provide(proxyLayer(options))))

const keyIdOf = (key: crypto.KeyObject) =>
  crypto.createHash("sha256").update(crypto.createPublicKey(key).export({ format: "der", type: "spki" })).digest("hex").slice(0, 16)

const withTempDir = <A, E, R>(f: (dir: string) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R | Scope.Scope> => Effect.flatMap(tempDir, f)

it.scopedLive("in devnet without PROXY_SIGNING_KEY the key is created once in DATA_DIR with mode 0600 and survives a restart", () =>
  withTempDir((dataDir) =>
    Effect.gen(function* () {
      const first = yield* signingKeyOf({ dataDir })
      const file = join(dataDir, "proxy-signing-key.pem")
      const info = yield* Effect.promise(() => stat(file))
      expect(info.mode & 0o777).toBe(0o600)
      const second = yield* signingKeyOf({ dataDir })
      expect(second).toEqual(first)
    })
  ))

it.scopedLive("servers starting together on one DATA_DIR agree on one devnet signing key (never a half-written file)", () =>
  Effect.forEach(Array.from({ length: 10 }), () =>
    withTempDir((dataDir) =>
      Effect.gen(function* () {
        const keys = yield* Effect.all(Array.from({ length: 16 }, () => signingKeyOf({ dataDir })), { concurrency: "unbounded" })
        expect(new Set(keys.map((k) => k.keyId)).size).toBe(1)
        const files = yield* Effect.promise(() => readdir(dataDir))
        expect(files.filter((f) => f.startsWith("proxy-signing-key"))).toEqual(["proxy-signing-key.pem"])
      })
    ), { discard: true }))

it.scopedLive("outside devnet a missing PROXY_SIGNING_KEY stops the layer with a clear config error", () =>
  Effect.gen(function* () {
    const error = yield* Effect.flip(signingKeyOf({ chainMode: "rpc" }))
    expect(ConfigError.isConfigError(error) && ConfigError.isMissingData(error)).toBe(true)
    expect(String(error)).toContain("PROXY_SIGNING_KEY is required outside devnet")
  }))

it.scopedLive("PROXY_SIGNING_KEY is accepted as PEM or as base64 DER; an RSA key is refused", () =>
  Effect.gen(function* () {
    const { privateKey } = crypto.generateKeyPairSync("ed25519")
    const pem = String(privateKey.export({ format: "pem", type: "pkcs8" }))
    const der = privateKey.export({ format: "der", type: "pkcs8" }).toString("base64")
    const fromPem = yield* signingKeyOf({ chainMode: "rpc", settings: { PROXY_SIGNING_KEY: pem } })
    const fromDer = yield* signingKeyOf({ chainMode: "rpc", settings: { PROXY_SIGNING_KEY: der } })
    expect(fromPem.keyId).toBe(keyIdOf(privateKey))
    expect(fromDer).toEqual(fromPem)
    expect(fromPem.publicKeyPem).toContain("BEGIN PUBLIC KEY")

    const rsa = crypto.generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey
    const error = yield* Effect.flip(signingKeyOf({ chainMode: "rpc", settings: { PROXY_SIGNING_KEY: String(rsa.export({ format: "pem", type: "pkcs8" })) } }))
    expect(String(error)).toContain("PROXY_SIGNING_KEY must be an Ed25519 private key")
  }))
