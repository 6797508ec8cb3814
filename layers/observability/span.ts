// Spans that cost nothing when tracing is off (issue 29). `Effect.withSpan` does its work even with the tracer disabled:
// it captures a stack trace where it is called, makes a no-op span, and provides it as the parent span, which copies
// the fiber's whole context (every service of the app) and its fiber refs. Measured: ~45 µs per span with a 120-service
// context on this machine, ~12 spans per paid call. `withSpan` here is `Effect.withSpan` while tracing is on
// (Tracing.ts switches it when its layer is built) and the identity while it is off.
import { Effect, type Tracer } from "effect"

let enabled = false

/** Called by TracingLive: spans are recorded from now on (true) or skipped (false). */
export const setSpansEnabled = (on: boolean): void => {
  enabled = on
}

/** Whether spans are recorded (tracing on): code that skips a library's own spans for speed falls back while it is. */
export const spansEnabled = (): boolean => enabled

/** `Effect.withSpan(name, options)` when tracing is on, else the effect itself. */
export const withSpan = (name: string, options?: Tracer.SpanOptions) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Tracer.ParentSpan>> =>
  enabled ? Effect.withSpan(self, name, options) : (self as Effect.Effect<A, E, Exclude<R, Tracer.ParentSpan>>)
