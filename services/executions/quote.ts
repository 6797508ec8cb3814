// A dynamic capability's quote, asked before payment: a signed POST to the agent's execution endpoint with `"quote":
// true` in the body, answered `{"price": "<USDC>"}` within QUOTE_TIMEOUT_MS and 4 KiB; the price must lie within the
// capability's maxPrice (docs/agent-requests.md "Metered pricing"). Refusals charge nothing.
import { Clock, Config, Effect, Option } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import { AgentProxy } from "../../layers/AgentProxy.js"
import type { AgentRecord, Capability } from "../../src/domain/Agent.js"
import { BadGateway } from "../../src/domain/Errors.js"
import { newId } from "../../src/domain/Ids.js"
import { parseUsdc } from "../../src/domain/Money.js"
import { meterOf } from "../../src/domain/Pricing.js"
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

export class Quotes extends Effect.Service<Quotes>()("executions/Quotes", {
  effect: Effect.gen(function* () {
    const proxy = yield* AgentProxy
    const timeoutMs = yield* Config.integer("QUOTE_TIMEOUT_MS").pipe(Config.withDefault(5_000))
    // Unpaid callers can cause quotes: the same request is answered from a short cache, and each agent gets at most a
    // few quote requests at a time (quoteCache.ts).
    const cache = makeQuoteCache({
      ttlMs: yield* Config.integer("QUOTE_CACHE_MS").pipe(Config.withDefault(30_000)),
      maxEntries: 10_000,
      maxInFlightPerAgent: yield* Config.integer("QUOTE_MAX_IN_FLIGHT").pipe(Config.withDefault(16))
    })

    /** The agent's quote for `input`: undefined for any capability that is not dynamic. */
    const quote = (agent: AgentRecord, capability: Capability, input: unknown) =>
      Effect.gen(function* () {
        const meter = meterOf(capability.pricing)
        if (meter.unit !== "micro-usdc") return undefined
        const key = quoteKey(agent.id, capability.id, input)
        const cached = cache.get(key, yield* Clock.currentTimeMillis)
        if (cached !== undefined) return cached
        if (!cache.acquire(agent.id)) {
          return yield* refused("too many quote requests in flight for this agent; try again shortly", { kind: "busy" })
        }
        const reply = yield* proxy.call({ agentId: agent.id, url: agent.endpoints.execution, requestId: newId("quo"), capabilityId: capability.id, input, timeoutMs, quote: true }).pipe(
          Effect.mapError((e) => refused(e.message.slice(0, 300), { kind: e.kind })),
          Effect.ensuring(Effect.sync(() => cache.release(agent.id)))
        )
        const read = readQuote(reply.body, meter.maxUnits)
        if ("problem" in read) return yield* refused(read.problem)
        cache.put(key, read.price, yield* Clock.currentTimeMillis)
        return read.price
      }).pipe(withSpan("Quotes.quote"))

    return { quote } as const
  }),
  dependencies: [AgentProxy.Default]
}) {}
