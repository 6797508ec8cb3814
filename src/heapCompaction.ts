// After start-up, one memory-reducing garbage collection, so the idle service does not keep the heap that loading it grew.
//
// Start-up allocates fast and most of what it allocates survives, so V8 grows the young generation to its maximum
// (two 16 MiB semi-spaces) and keeps it committed: ~31 MiB resident of which ~7 MiB is in use when the service idles.
// V8 gives it back only after a GC that reduces memory (or one at a low allocation rate, which start-up never has).
// The inspector's HeapProfiler.collectGarbage is such a GC (V8's low-memory notification): no `--expose-gc`, no V8 flag
// changed. It takes ~80 ms once; under load the young generation grows back as V8 sees fit, so calls pay nothing.
import { Duration, Effect, Layer } from "effect"
import { Session } from "node:inspector"

/** One full garbage collection that also shrinks the young generation and returns freed pages to the system. */
export const collectGarbage: Effect.Effect<void> = Effect.async<void>((resume) => {
  const session = new Session()
  session.connect()
  session.post("HeapProfiler.collectGarbage", () => {
    // Not from inside the callback: a session disconnected there leaves Node 20's event loop stuck (the process stops
    // answering; tried).
    setImmediate(() => {
      session.disconnect()
      resume(Effect.void)
    })
  })
})

/** Waits for the start-up's trailing work (the workers' first rounds) to settle, then collects once. */
export const CompactAfterStartLive = (delay: Duration.DurationInput = "1 second") =>
  Layer.scopedDiscard(Effect.forkScoped(Effect.sleep(delay).pipe(Effect.zipRight(collectGarbage), Effect.withSpan("heap.compactAfterStart"))))
