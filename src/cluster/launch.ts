// One server process (WEB_CONCURRENCY=1, and every worker), or the primary of WEB_CONCURRENCY server processes.
import cluster from "node:cluster"
import { type ConfigError, Effect, Layer } from "effect"
import type { AppConfig } from "../../layers/Config.js"
import { runPrimary } from "./primary.js"
import { webConcurrency } from "./settings.js"

/** Runs `app` until a signal: in this process, or (WEB_CONCURRENCY > 1) in workers under a primary. */
export const serve = <ROut, E, E2>(
  app: Layer.Layer<ROut, E, AppConfig>,
  config: Layer.Layer<AppConfig, E2>
): Effect.Effect<never, E | E2 | ConfigError.ConfigError | Effect.Effect.Error<ReturnType<typeof runPrimary>>> => {
  const here: Effect.Effect<never, E | E2 | Effect.Effect.Error<ReturnType<typeof runPrimary>>> = Layer.launch(app.pipe(Layer.provide(config)))
  // A worker's log lines carry its pid: which process served a request, and which one failed.
  if (cluster.isWorker) return here.pipe(Effect.annotateLogs("pid", process.pid))
  return Effect.flatMap(webConcurrency, (workers) => (workers === 1 ? here : runPrimary(workers).pipe(Effect.provide(config))))
}
