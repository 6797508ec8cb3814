// A dynamic capability's quote, asked before payment: a signed POST to the agent's execution endpoint with `"quote":
// true` in the body, answered `{"price": "<USDC>"}` within QUOTE_TIMEOUT_MS and 4 KiB; the price must lie within the
// capability's maxPrice (docs/agent-requests.md "Metered pricing"). Refusals charge nothing.
import { Config, Effect, Option } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import { AgentProxy } from "../../layers/AgentProxy.js"
import type { AgentRecord, Capability } from "../../src/domain/Agent.js"
import { BadGateway } from "../../src/domain/Errors.js"
import { newId } from "../../src/domain/Ids.js"
import { parseUsdc } from "../../src/domain/Money.js"
import { meterOf } from "../../src/domain/Pricing.js"

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

    /** The agent's quote for `input`: undefined for any capability that is not dynamic. */
    const quote = (agent: AgentRecord, capability: Capability, input: unknown) =>
      Effect.gen(function* () {
        const meter = meterOf(capability.pricing)
        if (meter.unit !== "micro-usdc") return undefined
        const reply = yield* proxy.call({ agentId: agent.id, url: agent.endpoints.execution, requestId: newId("quo"), capabilityId: capability.id, input, timeoutMs, quote: true }).pipe(
          Effect.mapError((e) => refused(e.message.slice(0, 300), { kind: e.kind }))
        )
        const read = readQuote(reply.body, meter.maxUnits)
        if ("problem" in read) return yield* refused(read.problem)
        return read.price
      }).pipe(withSpan("Quotes.quote"))

    return { quote } as const
  }),
  dependencies: [AgentProxy.Default]
}) {}
