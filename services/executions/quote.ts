// A dynamic capability's quote, asked before the call is charged: a signed POST to the agent's execution endpoint with `"quote":
// true` in the body, answered `{"price": "<USDC>"}` within QUOTE_TIMEOUT_MS and 4 KiB; the price must lie within the
// capability's maxPrice (docs/agent-requests.md "Metered pricing"). An unpaid request's challenge gets one only when it
// takes no payer's place; a paid or credit call's is asked once its signature verified. Refusals charge nothing.
import { Clock, Config, Effect, Option } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import { AgentProxy } from "../../layers/AgentProxy.js"
import type { AgentRecord, Capability } from "../../src/domain/Agent.js"
import { BadGateway, RateLimited, Unavailable } from "../../src/domain/Errors.js"
import { newId } from "../../src/domain/Ids.js"
import { parseUsdc } from "../../src/domain/Money.js"
import { meterOf } from "../../src/domain/Pricing.js"
import { makeQuoteAdmission } from "./quoteAdmission.js"
import { makeQuoteCache, quoteKey } from "./quoteCache.js"

export const QUOTE_MAX_BYTES = 4_096

const refused = (message: string, details: Record<string, unknown> = {}) =>
  new BadGateway({ code: "QUOTE_FAILED", message: `the agent's quote: ${message}; nothing was charged`, details })

/** The quote (agent fee, micro-USDC) in a quote reply, or why it cannot be used. */
export const readQuote = (body: unknown, maxPrice: bigint): { readonly price: bigint } | { readonly problem: string } => {
  if (JSON.stringify(body).length > QUOTE_MAX_BYTES) return { problem: `larger than ${QUOTE_MAX_BYTES} bytes` }
  const price = typeof body === "object" && body !== null && "price" in body ? (body as { readonly price: unknown }).price : undefined
  const parsed = typeof price === "string" ? parseUsdc(price) : Option.none()
  if (Option.isNone(parsed)) return { problem: "no `price` as a USDC decimal string" }
  if (parsed.value > maxPrice) return { problem: `price ${price} is above the capability's maxPrice` }
  return { price: parsed.value }
}

/** A whole-number setting of at least `min`, refused at start otherwise. */
const atLeast = (name: string, min: number, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a whole number of at least ${min}`, validation: (n) => n >= min }),
    Config.withDefault(fallback)
  )

/** Retry-After (seconds) for a payer who found every slot of the agent held by other payers. */
const BUSY_RETRY_SECONDS = 1

export class Quotes extends Effect.Service<Quotes>()("executions/Quotes", {
  effect: Effect.gen(function* () {
    const proxy = yield* AgentProxy
    const timeoutMs = yield* Config.integer("QUOTE_TIMEOUT_MS").pipe(Config.withDefault(5_000))
    // The same request is answered from a short cache (quoteCache.ts); who may ask an agent at all, how many at a time
    // and how often, by verified payer or else by address (quoteAdmission.ts).
    const cache = makeQuoteCache({
      ttlMs: yield* Config.integer("QUOTE_CACHE_MS").pipe(Config.withDefault(30_000)),
      maxEntries: 10_000
    })
    const maxInFlightPerAgent = yield* atLeast("QUOTE_MAX_IN_FLIGHT", 1, 16)
    const admission = makeQuoteAdmission({
      maxInFlightPerAgent,
      // 0: unpaid requests never ask a quote (their 402 names the maximum).
      maxUnverifiedInFlightPerAgent: Math.min(maxInFlightPerAgent, yield* atLeast("QUOTE_UNVERIFIED_IN_FLIGHT", 0, 4)),
      maxInFlightPerClient: yield* atLeast("QUOTE_CLIENT_IN_FLIGHT", 1, 2),
      perClientPerWindow: yield* atLeast("QUOTE_CLIENT_PER_WINDOW", 1, 30),
      windowMs: 1_000 * (yield* atLeast("QUOTE_WINDOW_SECONDS", 1, 60)),
      maxClients: 100_000,
      quoteTimeoutMs: timeoutMs
    })

    const overLimit = (limit: "in_flight" | "rate", retryAfterSeconds: number) =>
      new RateLimited({
        code: "QUOTE_RATE_LIMITED",
        message: limit === "rate"
          ? "too many quote requests from this client in the current window; nothing was charged"
          : "this client already has the most quote requests in flight to this agent; nothing was charged",
        details: { limit, retryAfterSeconds }
      })

    /** Asks the agent (admitted: `release` runs once it answered or failed) and caches a usable quote. */
    const ask = (agent: AgentRecord, capability: Capability, input: unknown, maxUnits: bigint, key: string, release: () => void) =>
      Effect.gen(function* () {
        const reply = yield* proxy.call({ agentId: agent.id, url: agent.endpoints.execution, requestId: newId("quo"), capabilityId: capability.id, input, timeoutMs, quote: true }).pipe(
          Effect.mapError((e) => refused(e.message.slice(0, 300), { kind: e.kind })),
          Effect.ensuring(Effect.sync(release))
        )
        const read = readQuote(reply.body, maxUnits)
        if ("problem" in read) return yield* refused(read.problem)
        cache.put(key, read.price, yield* Clock.currentTimeMillis)
        return read.price
      })

    /** A dynamic capability's meter and its cached quote for `input`; none for any other capability. */
    const lookUp = (agent: AgentRecord, capability: Capability, input: unknown) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const meter = meterOf(capability.pricing)
        if (meter.unit !== "micro-usdc") return undefined
        const key = quoteKey(agent.id, capability.id, input)
        return { maxUnits: meter.maxUnits, key, cached: cache.get(key, now), now }
      })

    /**
     * The quote an unpaid request's 402 names, when it can be had without taking a payer's place: a cached one, or the
     * agent's, asked in the unverified callers' share of its slots under `address`'s own limits. Undefined for a capability
     * that is not dynamic, without an address (MCP), or when unverified callers hold that whole share: the challenge then
     * names the maximum alone, and the quote is asked once the payment verifies. Over the address's own limit: 429.
     */
    const forChallenge = (agent: AgentRecord, capability: Capability, input: unknown, address: string | undefined) =>
      Effect.gen(function* () {
        const found = yield* lookUp(agent, capability, input)
        if (found === undefined || found.cached !== undefined || address === undefined) return found?.cached
        const admitted = admission.admit(agent.id, { verified: false, address }, found.now)
        if (admitted._tag === "Busy") return undefined
        if (admitted._tag === "OverLimit") return yield* overLimit(admitted.limit, admitted.retryAfterSeconds)
        return yield* ask(agent, capability, input, found.maxUnits, found.key, admitted.release)
      }).pipe(withSpan("Quotes.forChallenge"))

    /**
     * The quote of a call whose payment or credit signature verified (`payer`): cached, or asked in any free slot of the
     * agent (unverified callers never hold more than their share), under the payer's own limits. Undefined for a
     * capability that is not dynamic.
     */
    const forPayer = (agent: AgentRecord, capability: Capability, input: unknown, payer: string) =>
      Effect.gen(function* () {
        const found = yield* lookUp(agent, capability, input)
        if (found === undefined || found.cached !== undefined) return found?.cached
        const admitted = admission.admit(agent.id, { verified: true, payer }, found.now)
        if (admitted._tag === "OverLimit") return yield* overLimit(admitted.limit, admitted.retryAfterSeconds)
        if (admitted._tag === "Busy") {
          return yield* new Unavailable({
            code: "QUOTE_BUSY",
            message: "every quote slot of this agent is held by other paying callers; try again shortly; nothing was charged",
            details: { retryAfterSeconds: BUSY_RETRY_SECONDS }
          })
        }
        return yield* ask(agent, capability, input, found.maxUnits, found.key, admitted.release)
      }).pipe(withSpan("Quotes.forPayer"))

    return { forChallenge, forPayer } as const
  }),
  dependencies: [AgentProxy.Default]
}) {}
