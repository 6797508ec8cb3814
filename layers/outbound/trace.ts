// W3C trace context for outbound calls: a caller's valid traceparent (a chain's) or the current span's when a tracer
// records one, else random ids.
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
 * What an agent call carries: a caller's valid traceparent as is (a chain's: the agent sees one trace id across the
 * chain), except that within the trace we are recording our own span goes instead (the agent's spans then hang off our
 * call to it); without one, the current span when a tracer records it, else random ids.
 */
export const outboundTraceparent = (given: string | undefined) =>
  Effect.map(spanTraceparent, (span) => {
    const caller = given !== undefined && validTraceparent(given) ? given : undefined
    if (Option.isSome(span) && (caller === undefined || caller.slice(3, 35) === span.value.slice(3, 35))) return span.value
    return caller ?? randomTraceparent()
  })

/** The current trace's id when tracing records one, else a fresh random id (a chain's trace). */
export const currentTraceId = Effect.map(spanTraceparent, (span) =>
  Option.match(span, { onNone: () => crypto.randomBytes(16).toString("hex"), onSome: (t) => t.slice(3, 35) }))
