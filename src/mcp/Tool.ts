// One MCP tool: what tools/list shows of it (JSON Schemas made from its Effect Schemas), how its arguments are decoded
// (bad ones are a protocol error) and how its outcome becomes a tools/call result (a failure is a tool error).
import { ErrorCode as RpcCode, McpError, type CallToolResult, type Tool as ToolListing } from "@modelcontextprotocol/sdk/types.js"
import { Effect, ParseResult, Schema } from "effect"
import { objectSchemaOf } from "./jsonSchema.js"
import { PaymentRequiredObject } from "./payment.js"
import { type ToolFailure, failureResult } from "./results.js"

/** What a tools/call carries besides the arguments. */
export interface ToolCall {
  /**
   * `params._meta` of the request. A paid tool finds the client's x402 PaymentPayload under `"x402/payment"`
   * (x402 transports-v2/mcp.md); free tools ignore it.
   */
  readonly meta: Readonly<Record<string, unknown>>
  /** The arguments as the client sent them, before decoding (what a registration's walletProof signs). */
  readonly args?: unknown
}

/** A tool's value together with `_meta` for the result (a paid tool's settlement under `"x402/payment-response"`). */
export class WithMeta<O> {
  constructor(readonly value: O, readonly meta: Readonly<Record<string, unknown>>) {}
}

export interface ToolSpec<I, II, O, OI extends Readonly<Record<string, unknown>>> {
  /** snake_case, stable: assistants' configurations and prompts refer to it. */
  readonly name: string
  readonly title: string
  /** For the assistant: what it answers, when to use it, and what it costs. */
  readonly description: string
  /** Arguments as JSON (numbers and booleans, not query strings); excess properties are refused. */
  readonly input: Schema.Schema<I, II>
  /** The structuredContent; its encoded side is what the client sees and validates. */
  readonly output: Schema.Schema<O, OI>
  /** Free reads by default: read-only, idempotent, inside the marketplace (a paid tool: neither). */
  readonly hints?: { readonly readOnly: boolean; readonly idempotent: boolean }
  /**
   * Paid with x402 (transports-v2/mcp.md): the listed outputSchema is an `anyOf` of `output` and x402's PaymentRequired,
   * the structuredContent of its payment-required error result (the SDK client validates that one too).
   */
  readonly paid?: boolean
  readonly run: (input: I, call: ToolCall) => Effect.Effect<O | WithMeta<O>, ToolFailure>
}

/** A tool with its types erased, as the registry holds it. */
export interface Tool {
  readonly name: string
  readonly listing: ToolListing
  /** Fails only with a protocol error (bad arguments); every outcome of the tool itself is a result. */
  readonly invoke: (args: unknown, call: ToolCall) => Effect.Effect<CallToolResult, McpError>
}

const FREE = { readOnly: true, idempotent: true } as const
const PAID = { readOnly: false, idempotent: false } as const

const invalidArguments = (name: string, error: ParseResult.ParseError) => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error).slice(0, 50).map((issue) => ({
    path: issue.path.map(String).join("."),
    message: issue.message.length > 300 ? `${issue.message.slice(0, 300)}…` : issue.message
  }))
  const summary = issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ")
  return new McpError(RpcCode.InvalidParams, `invalid arguments for ${name}: ${summary}`, { code: "VALIDATION_ERROR", issues })
}

export const defineTool = <I, II, O, OI extends Readonly<Record<string, unknown>>>(spec: ToolSpec<I, II, O, OI>): Tool => {
  const decode = Schema.decodeUnknown(spec.input, { errors: "all", onExcessProperty: "error" })
  const encode = Schema.encode(spec.output)
  const paid = spec.paid === true
  const hints = spec.hints ?? (paid ? PAID : FREE)
  const success = (outcome: O | WithMeta<O>) => {
    const [value, meta] = outcome instanceof WithMeta ? [outcome.value, outcome.meta] : [outcome, undefined]
    return encode(value).pipe(
      Effect.orDie, // our output not matching our own schema is a bug, reported as INTERNAL_ERROR
      Effect.map((encoded): CallToolResult => ({
        content: [{ type: "text", text: JSON.stringify(encoded) }],
        structuredContent: { ...encoded },
        ...(meta === undefined ? {} : { _meta: { ...meta } })
      }))
    )
  }
  return {
    name: spec.name,
    listing: {
      name: spec.name,
      title: spec.title,
      description: spec.description,
      inputSchema: objectSchemaOf(spec.input),
      outputSchema: paid ? objectSchemaOf(Schema.Union(spec.output, PaymentRequiredObject)) : objectSchemaOf(spec.output),
      annotations: {
        title: spec.title,
        readOnlyHint: hints.readOnly,
        destructiveHint: false,
        idempotentHint: hints.idempotent,
        openWorldHint: false
      }
    },
    invoke: (args, call) =>
      decode(args ?? {}).pipe(
        Effect.mapError((error) => invalidArguments(spec.name, error)),
        Effect.flatMap((input) =>
          spec.run(input, { ...call, args: args ?? {} }).pipe(
            Effect.flatMap(success),
            Effect.catchAllCause((cause) => failureResult(spec.name, cause))
          )),
        Effect.withSpan("Mcp.tool", { attributes: { tool: spec.name } })
      )
  }
}
