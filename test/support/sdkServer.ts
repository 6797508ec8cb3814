// The service as the SDK's tests meet it: one server process (the start script, the run's devnet, a 1-second devnet
// hold so earnings can be withdrawn at once) for the tests of one file, stopped after them.
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll } from "vitest"
import { sharedSettings } from "./processes.js"
import { ensureBundle, type ServerProcess, serverProcess } from "./servers.js"

/** Starts the server before the file's tests; `current()` is it once they run. */
export const sdkServer = () => {
  let scope: Scope.CloseableScope | undefined
  let server: ServerProcess | undefined
  beforeAll(async () => {
    await ensureBundle()
    scope = Effect.runSync(Scope.make())
    server = await Effect.runPromise(
      Effect.gen(function* () {
        const { env } = yield* sharedSettings({ DEVNET_HOLD_SECONDS: "1", LOG_LEVEL: "warn" })
        return yield* serverProcess(env)
      }).pipe(Scope.extend(scope))
    )
  }, 120_000)
  afterAll(async () => {
    if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  }, 60_000)
  return {
    current: (): ServerProcess => {
      if (server === undefined) throw new Error("the SDK's server has not started")
      return server
    }
  }
}
