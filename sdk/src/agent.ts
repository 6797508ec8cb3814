// The agent side: a plain Node request handler that serves an agent's capabilities to the marketplace. It refuses
// requests the marketplace did not sign, validates the input against the capability's schema, runs the handler and
// answers a JSON object; inside a chain, `ctx.hire` calls other agents within the chain's budget.
import type { IncomingMessage, ServerResponse } from "node:http"
import { createRequire } from "node:module"
import type { ValidateFunction } from "ajv"
import { MarketplaceError } from "./errors.js"
import { joinUrl, request } from "./http.js"
import { type Pricing, pricingWire, usageExpected, usageHeader } from "./pricing.js"
import { checkMarketplaceRequest, keyCache, type MarketplaceKey } from "./requestSignature.js"

const require = createRequire(import.meta.url)
// ajv ships CommonJS; its ESM typings expose the class as the default export's `default`.
const Ajv2020: typeof import("ajv/dist/2020.js").default = require("ajv/dist/2020.js")

type JsonObject = Record<string, unknown>

export interface HireResult<O = JsonObject> {
  readonly requestId: string
  readonly transactionId: string | undefined
  readonly output: O
  /** What this sub-call cost the chain: the capability's price plus the platform fee. */
  readonly cost: { readonly agentFee: string; readonly platformFee: string; readonly total?: string } | undefined
  readonly remainingBudget: string | undefined
  /** `chain.readHandle`: reads this sub-call's result again (as X-PAYMENT); shown once. */
  readonly readHandle: string | undefined
}

export interface AgentContext {
  readonly requestId: string
  readonly capabilityId: string
  /** W3C trace context of this call; pass it on to other services. */
  readonly traceparent: string | undefined
  /** Present when this call is part of a chain (the client paid a budget and this agent has chaining enabled). */
  readonly chainToken: string | undefined
  /**
   * Hires another agent inside this call's chain, paid from the chain's budget (no wallet involved). Throws a
   * MarketplaceError (e.g. PaymentError BUDGET_EXCEEDED, ValidationError DEPTH_LIMIT) when the marketplace refuses.
   * @example const { output } = await ctx.hire(summariserId, "summarize", { text })
   */
  readonly hire: <O = JsonObject>(agentId: string, capabilityId: string, input: JsonObject) => Promise<HireResult<O>>
  /**
   * Reports what this call used, sent as `X-Usage-Units`: tokens for `per-token`, micro-USDC of agent fee for `dynamic`
   * (at most the quote). Ignored for flat and `per-minute` pricing (the marketplace measures time itself).
   * @example ctx.reportUsage(completion.usage.total_tokens)
   */
  readonly reportUsage: (units: number | bigint) => void
}

interface CapabilityBase {
  readonly name?: string
  readonly description: string
  /** JSON Schema of the input (checked by the marketplace before payment, and again here). */
  readonly inputSchema?: JsonObject
  /** JSON Schema of the output (the marketplace checks your answers against it). */
  readonly outputSchema?: JsonObject
  /**
   * Runs one paid call; returns the output (a JSON object). Annotate `input` with your type: it has passed `inputSchema`.
   * Metered capabilities report what the call used with `ctx.reportUsage(units)`.
   * (A method signature, so a handler declaring a narrower input type is accepted.)
   */
  handler(input: JsonObject, ctx: AgentContext): JsonObject | Promise<JsonObject>
}

/**
 * One capability: a flat `price` per call in USDC (e.g. "0.01"; the client pays it plus the platform's 0.001), or a
 * metered `pricing` (`per-token`, `per-minute`, `dynamic` with its quote handler), never both.
 */
export type CapabilityDefinition = CapabilityBase & (
  | { readonly price: string; readonly pricing?: undefined }
  | { readonly pricing: Pricing; readonly price?: undefined }
)

export interface AgentDefinition {
  /** The marketplace's base URL (its signing key and the hire endpoint are read from there). */
  readonly marketplaceUrl: string
  readonly name: string
  readonly description?: string
  readonly tags?: ReadonlyArray<string>
  readonly capabilities: Readonly<Record<string, CapabilityDefinition>>
  /** For tests: the key to trust instead of fetching it, and the clock. */
  readonly trustedKey?: MarketplaceKey
  readonly now?: () => number
  /** Where the agent reports what its owner should fix (a metered call answered without usage); default console.warn. */
  readonly warn?: (message: string) => void
}

export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void

const MAX_BODY_BYTES = 1024 * 1024

const isJsonObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value)

const readBody = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        reject(new Error("body too large"))
        req.destroy()
      } else chunks.push(chunk)
    })
    req.on("end", () => resolve(Buffer.concat(chunks)))
    req.on("error", reject)
  })

const answer = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

/** A capability's pricing, flat `price` included. */
export const pricingOf = (c: CapabilityDefinition): Pricing => c.pricing ?? { model: "per-request", price: c.price }

/** The registration's capabilities (the wire format of `POST /api/v1/agents`). */
export const capabilitiesOf = (definition: AgentDefinition) =>
  Object.entries(definition.capabilities).map(([id, c]) => ({
    id,
    name: c.name ?? id,
    description: c.description,
    pricing: pricingWire(pricingOf(c)),
    ...(c.inputSchema === undefined ? {} : { inputSchema: c.inputSchema }),
    ...(c.outputSchema === undefined ? {} : { outputSchema: c.outputSchema })
  }))

/**
 * Builds an agent: `handler` serves its capabilities (mount it at the execution URL you register).
 *
 * @example
 * const agent = createAgent({
 *   marketplaceUrl: "http://127.0.0.1:3000",
 *   name: "Summariser",
 *   capabilities: {
 *     summarize: { description: "Summarises text", price: "0.01",
 *       inputSchema: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
 *       handler: async ({ text }) => ({ summary: text.slice(0, 100) }) }
 *   }
 * })
 * http.createServer(agent.handler).listen(4000)
 */
export const createAgent = (definition: AgentDefinition) => {
  const now = definition.now ?? Date.now
  const warn = definition.warn ?? ((message: string) => console.warn(message))
  const trusted = definition.trustedKey
  const keys = keyCache(definition.marketplaceUrl)
  const keyFor = (keyId: string | undefined) => (trusted === undefined ? keys(keyId) : Promise.resolve(trusted))
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
  const validators = new Map<string, ValidateFunction>()
  for (const [id, c] of Object.entries(definition.capabilities)) if (c.inputSchema !== undefined) validators.set(id, ajv.compile(c.inputSchema))

  const hireWith = (token: { current: string | undefined }, traceparent: string | undefined) =>
    async <O = JsonObject>(agentId: string, capabilityId: string, input: JsonObject): Promise<HireResult<O>> => {
      if (token.current === undefined) {
        throw new MarketplaceError("SDK_NOT_IN_CHAIN", "this call carries no X-Chain-Token: the client paid no chain budget, or chaining is disabled for this agent", 0)
      }
      const { data } = await request<{
        requestId: string
        transactionId?: string
        output: O
        cost?: HireResult["cost"]
        chain?: { childToken?: string; remainingBudget?: string; readHandle?: string }
      }>(joinUrl(definition.marketplaceUrl, "/api/v1/execute"), {
        json: { targetAgentId: agentId, capabilityId, input },
        headers: { "X-Chain-Token": token.current, ...(traceparent === undefined ? {} : { traceparent }) }
      })
      // The answer carries a fresh token (30 s) for this agent's next sub-call.
      if (data.chain?.childToken !== undefined) token.current = data.chain.childToken
      return {
        requestId: data.requestId,
        transactionId: data.transactionId,
        output: data.output,
        cost: data.cost,
        remainingBudget: data.chain?.remainingBudget,
        readHandle: data.chain?.readHandle
      }
    }

  /** A dynamic capability's price for this input (the marketplace asks before the payer pays; no work is done). */
  const quote = async (res: ServerResponse, capabilityId: string, pricing: Pricing, input: JsonObject) => {
    if (pricing.model !== "dynamic") return answer(res, 400, { error: `${capabilityId} is ${pricing.model}: it takes no quote requests` })
    try {
      return answer(res, 200, { price: await pricing.quote(input) })
    } catch (error) {
      return answer(res, 500, { error: error instanceof Error ? error.message : String(error) })
    }
  }

  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST") return answer(res, 405, { error: "POST only" })
    let raw: Buffer
    try {
      raw = await readBody(req)
    } catch {
      return answer(res, 413, { error: "body too large" })
    }
    const keyId = typeof req.headers["x-marketplace-key-id"] === "string" ? req.headers["x-marketplace-key-id"] : undefined
    const refusal = checkMarketplaceRequest(req.headers, raw, await keyFor(keyId), now())
    if (refusal !== undefined) return answer(res, 401, { error: refusal })
    const body = JSON.parse(raw.toString("utf8")) as { requestId: string; capabilityId?: unknown; input?: unknown; quote?: unknown }
    const capabilityId = typeof body.capabilityId === "string" ? body.capabilityId : ""
    const capability = definition.capabilities[capabilityId]
    if (capability === undefined) return answer(res, 404, { error: `unknown capability ${JSON.stringify(capabilityId)}` })
    const input = body.input
    if (!isJsonObject(input)) return answer(res, 400, { error: "input must be a JSON object" })
    const validate = validators.get(capabilityId)
    if (validate !== undefined && !validate(input)) {
      return answer(res, 400, { error: "input does not match the capability's inputSchema", issues: validate.errors ?? [] })
    }
    const pricing = pricingOf(capability)
    if (body.quote === true) return quote(res, capabilityId, pricing, input)
    const header = (name: string) => (typeof req.headers[name] === "string" ? (req.headers[name] as string) : undefined)
    const token = { current: header("x-chain-token") }
    const traceparent = header("traceparent")
    let usage: string | undefined
    const reportUsage = (units: number | bigint) => void (usage = usageHeader(units))
    const ctx: AgentContext = { requestId: body.requestId, capabilityId, traceparent, chainToken: token.current, hire: hireWith(token, traceparent), reportUsage }
    try {
      const output = await capability.handler(input, ctx)
      if (!isJsonObject(output)) return answer(res, 500, { error: "the handler must return a JSON object" })
      const missing = usage === undefined && token.current === undefined ? usageExpected(pricing) : undefined
      if (missing !== undefined) warn(`${definition.name}: ${capabilityId} is ${pricing.model} but its handler reported no usage (ctx.reportUsage): ${missing} (request ${body.requestId})`)
      return answer(res, 200, output, usage === undefined ? {} : { "X-Usage-Units": usage })
    } catch (error) {
      return answer(res, 500, { error: error instanceof Error ? error.message : String(error) })
    }
  }

  return {
    definition,
    /** The Node request handler (node:http, Express `app.post(path, agent.handler)`, Fastify via `reply.hijack()`). */
    handler: ((req, res) => {
      serve(req, res).catch((error: unknown) => {
        if (!res.headersSent) answer(res, 500, { error: error instanceof Error ? error.message : String(error) })
      })
    }) satisfies NodeHandler,
    /** The registration body's capabilities. */
    capabilities: capabilitiesOf(definition)
  } as const
}

export type Agent = ReturnType<typeof createAgent>
