// W3C trace context for outbound calls: accept a caller's valid traceparent, else derive one from the current span.
import { Effect, Option } from "effect"
import * as crypto from "node:crypto"

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/

export const validTraceparent = (value: string): boolean => {
  const m = TRACEPARENT.exec(value)
  return m !== null && !/^0+$/.test(m[1] ?? "") && !/^0+$/.test(m[2] ?? "")
}

/** From the current span when there is one, else random ids. */
export const freshTraceparent = Effect.map(Effect.option(Effect.currentSpan), (span) => {
  const candidate = Option.isSome(span) ? `00-${span.value.traceId}-${span.value.spanId}-01` : ""
  return validTraceparent(candidate)
    ? candidate
    : `00-${crypto.randomBytes(16).toString("hex")}-${crypto.randomBytes(8).toString("hex")}-01`
})
