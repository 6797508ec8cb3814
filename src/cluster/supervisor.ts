// The primary's workers: N forks of this program serving one port (node:cluster hands out connections round-robin),
// each replaced when it dies, until they crash-loop; on the primary's stop, SIGTERM to each, SIGKILL after a grace.
import cluster, { type Worker } from "node:cluster"
import { Data, Deferred, Effect, Runtime } from "effect"
import { restartBudget } from "./restartBudget.js"
import { announceReady } from "./supervised.js"

export class WorkersCrashLooping extends Data.TaggedError("WorkersCrashLooping")<{ readonly message: string }> {}

export interface SuperviseOptions {
  readonly count: number
  /** Added to each worker's environment (where the shared database and chain are). */
  readonly env: Readonly<Record<string, string>>
  /** Replacements allowed within `windowMs` before the primary gives up. */
  readonly maxRestarts: number
  readonly windowMs: number
  /** How long a stopping worker gets to finish (its requests, its pool) before SIGKILL. */
  readonly stopGraceMs: number
}

const describeExit = (code: number | null, signal: string | null) => (signal === null ? `exit code ${code ?? "?"}` : `signal ${signal}`)

/** Runs the workers until they crash-loop (fails) or the scope closes (stops every worker and waits for it). */
export const superviseWorkers = (options: SuperviseOptions) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const log = (effect: Effect.Effect<void>) => void Runtime.runFork(runtime)(effect)
    const gaveUp = yield* Deferred.make<never, WorkersCrashLooping>()
    const budget = restartBudget(options.maxRestarts, options.windowMs)
    const live = new Set<Worker>()
    let stopping = false
    // Ctrl-C reaches the whole process group: a worker stopping with it is not replaced (prepended: before the runtime's own handler).
    const onSignal = () => void (stopping = true)
    process.prependListener("SIGINT", onSignal)
    process.prependListener("SIGTERM", onSignal)

    /** Live workers that listen; once all of them do for the first time, one line says so (tests and the bench wait for it). */
    const listening = new Map<Worker, number>()
    let announced = false
    const fork = (replacing?: number) => {
      const worker = cluster.fork(options.env)
      const pid = worker.process.pid ?? 0
      live.add(worker)
      worker.once("listening", (address) => {
        const url = `http://${address.addressType === 6 ? `[${address.address}]` : address.address}:${address.port}`
        listening.set(worker, pid)
        if (replacing !== undefined) log(Effect.logInfo(`server worker pid ${pid} (replacing pid ${replacing}) listening on ${url}`))
        if (!announced && listening.size === options.count) {
          announced = true
          log(Effect.logInfo(`${options.count} server workers listening on ${url} (primary pid ${process.pid}, worker pids ${[...listening.values()].join(", ")})`))
          announceReady()
        }
      })
      worker.once("exit", (code, signal) => {
        live.delete(worker)
        listening.delete(worker)
        if (stopping) return
        const why = describeExit(code, signal)
        if (budget.allow(Date.now())) {
          log(Effect.logWarning(`server worker pid ${pid} ended (${why}); starting a replacement`))
          fork(pid)
          return
        }
        stopping = true
        Deferred.unsafeDone(gaveUp, Effect.fail(new WorkersCrashLooping({
          message: `server workers are crash-looping (${budget.recent()} exits within ${options.windowMs / 1000} s, the last: pid ${pid}, ${why}); giving up, see the workers' errors above`
        })))
      })
    }

    const stopAll = Effect.promise(async () => {
      stopping = true
      const exited = [...live].map((worker) => new Promise<void>((resolve) => (worker.isDead() ? resolve() : worker.once("exit", () => resolve()))))
      for (const worker of live) worker.process.kill("SIGTERM")
      const timer = setTimeout(() => {
        for (const worker of live) worker.process.kill("SIGKILL")
      }, options.stopGraceMs)
      await Promise.all(exited)
      clearTimeout(timer)
    })
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(stopAll, Effect.sync(() => {
        process.removeListener("SIGINT", onSignal)
        process.removeListener("SIGTERM", onSignal)
      })))

    for (let i = 0; i < options.count; i++) fork()
    const failure = yield* Deferred.await(gaveUp).pipe(Effect.flip)
    yield* Effect.logError(failure.message)
    return yield* failure
  })
