// W3C trace context for outbound calls: the current span's when tracing records one, else a caller's valid
// traceparent (a chain's), else random ids.
import { Effect, Option } from "effect"
import * as crypto from "node:crypto"

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/

export const validTraceparent = (value: string): boolean => {
  const m = TRACEPARENT.exec(value)
  return m !== null && !/^0+$/.test(m[1] ?? "") && !/^0+$/.test(m[2] ?? "")
}

/** The current span's context when a tracer records it (a disabled tracer's spans are "noop", never valid). */
export const spanTraceparent = Effect.map(Effect.option(Effect.currentSpan), (span) =>
  Option.filter(
    Option.map(span, (s) => `00-${s.traceId}-${s.spanId}-${s.sampled ? "01" : "00"}`),
    validTraceparent
  ))

const randomTraceparent = () => `00-${crypto.randomBytes(16).toString("hex")}-${crypto.randomBytes(8).toString("hex")}-01`

/** From the current span when there is one, else random ids. */
export const freshTraceparent = Effect.map(spanTraceparent, Option.getOrElse(randomTraceparent))

/**
 * What an agent call carries: with tracing on, the call's own span (so the agent's spans join our trace under it);
 * with tracing off, the caller's valid traceparent if any (a chain keeps one trace id across its calls), else random.
 */
export const outboundTraceparent = (given: string | undefined) =>
  Effect.map(spanTraceparent, (span) =>
    Option.getOrElse(span, () => (given !== undefined && validTraceparent(given) ? given : randomTraceparent())))

/** The current trace's id when tracing records one, else a fresh random id (a chain's trace). */
export const currentTraceId = Effect.map(spanTraceparent, (span) =>
  Option.match(span, { onNone: () => crypto.randomBytes(16).toString("hex"), onSome: (t) => t.slice(3, 35) }))
