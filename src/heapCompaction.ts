// At the end of start-up, memory-reducing garbage collections, so the idle service does not keep the heap loading it grew.
//
// Start-up allocates fast and most of what it allocates survives, so V8 grows the young generation to its maximum
// (two 16 MiB semi-spaces) and keeps it committed: ~31 MiB resident of which ~7 MiB is in use when the service idles.
// V8 gives it back only after a GC that reduces memory (or one at a low allocation rate, which start-up never has).
// The inspector's HeapProfiler.collectGarbage is such a GC (V8's low-memory notification): no `--expose-gc`, no V8 flag
// changed. Two of them: one before the port opens (what a client sees first), one a second after it serves (what the
// routes' set-up and the workers' first rounds left). ~80 ms each, once; under load the young generation grows back as
// V8 sees fit, so calls pay nothing (bench/analysis.md: CPU per paid call unchanged, peak RSS lower).
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

/** Before the port opens (the services are built): a client's first look, /health, already sees the compacted heap. */
export const CompactBeforeListeningLive: Layer.Layer<never> = Layer.effectDiscard(collectGarbage.pipe(Effect.withSpan("heap.compactBeforeListening")))

/** Once it serves: waits for the start-up's trailing work (the workers' first rounds) to settle, then collects once. */
export const CompactAfterStartLive = (delay: Duration.DurationInput = "1 second") =>
  Layer.scopedDiscard(Effect.forkScoped(Effect.sleep(delay).pipe(Effect.zipRight(collectGarbage), Effect.withSpan("heap.compactAfterStart"))))
