// Entry point: configuration from the environment, then the whole service (or its workers) until SIGINT/SIGTERM. A start-up failure is
// one message on stderr and exit code 1.
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { ConfigLive } from "../layers/Config.js"
import { DataDirReadyLive } from "../layers/dataDir.js"
import { AppLive } from "./App.js"
import { serve } from "./cluster/launch.js"
import { watchSupervisor } from "./cluster/supervised.js"
import { describeStartupFailure } from "./startupFailure.js"

/** The configuration, handed on only once DATA_DIR is known to be usable. */
const ConfigReadyLive = Layer.provideMerge(DataDirReadyLive, ConfigLive)

// Under `npm start`'s supervisor: stop with it, however it dies.
watchSupervisor()

// WEB_CONCURRENCY > 1: this process becomes the primary of that many server processes (src/cluster/).
serve(AppLive, ConfigReadyLive).pipe(
  Effect.tapErrorCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Effect.sync(() => console.error(`agent marketplace could not start: ${describeStartupFailure(cause, process.env["PORT"] ?? "3000")}`))
  ),
  NodeRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true })
)
