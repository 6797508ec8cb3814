// Child processes of the benchmark and the clean-up that runs on success, errors, Ctrl-C and SIGTERM.
import { type ChildProcess, spawn } from "node:child_process"

const OUTPUT_LIMIT = 32 * 1024

export interface Child {
  readonly name: string
  readonly process: ChildProcess
  readonly pid: number
  /** The last 32 KiB of stdout and stderr. */
  readonly output: () => string
  /** Bytes written to stdout and stderr so far. */
  readonly outputBytes: () => number
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  readonly alive: () => boolean
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. Idempotent. */
  readonly stop: (graceMs?: number) => Promise<void>
  /** Resolves with the first IPC message of this type (rejects when the child exits first or after `timeoutMs`). */
  readonly message: (type: string, timeoutMs?: number) => Promise<Record<string, unknown>>
}

// ---------------------------------------------------------------------------------------------------------------
// clean-up registry: a LIFO stack of async finalizers

const finalizers: Array<{ readonly name: string; readonly run: () => Promise<void> }> = []
let cleaning: Promise<void> | undefined

/** Registers a finalizer (it should be idempotent); returns a function that unregisters it without running it. */
export const onCleanup = (name: string, run: () => Promise<void>): (() => void) => {
  const entry = { name, run }
  finalizers.push(entry)
  return () => {
    const i = finalizers.indexOf(entry)
    if (i >= 0) finalizers.splice(i, 1)
  }
}

/**
 * Runs every registered finalizer, newest first; each gets its own time limit. Calls while it runs share the run; once
 * it is done, what was registered since can be cleaned up by another call (a bench that starts fresh infrastructure).
 */
export const cleanupAll = (): Promise<void> =>
  (cleaning ??= (async () => {
    while (finalizers.length > 0) {
      const entry = finalizers.pop()
      if (entry === undefined) break
      let timer: NodeJS.Timeout | undefined
      try {
        await Promise.race([
          entry.run(),
          new Promise<void>((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), 15_000)))
        ])
      } catch (error) {
        console.error(`  clean-up of ${entry.name} failed: ${String(error)}`)
      } finally {
        clearTimeout(timer)
      }
    }
  })().finally(() => {
    cleaning = undefined
  }))

const liveChildren = new Set<ChildProcess>()

/** Ctrl-C, SIGTERM and crashes: clean up, then exit non-zero. A synchronous last resort kills what is left on exit. */
export const installSignalHandlers = (): void => {
  const bail = (why: string, code: number) => {
    console.error(`\n${why}: cleaning up…`)
    void cleanupAll().finally(() => process.exit(code))
    setTimeout(() => process.exit(code), 30_000).unref()
  }
  // `on`, not `once`: Ctrl-C reaches the whole process group and tsx relays it once more; with no listener left, tsx's
  // own hidden handler would exit at once, in the middle of the clean-up.
  let bailing = false
  const onSignal = (why: string, code: number) => () => {
    if (bailing) return
    bailing = true
    bail(why, code)
  }
  process.on("SIGINT", onSignal("interrupted (SIGINT)", 130))
  process.on("SIGTERM", onSignal("terminated (SIGTERM)", 143))
  process.on("SIGHUP", onSignal("hang-up (SIGHUP)", 129))
  process.on("uncaughtException", (error) => {
    console.error(error)
    bail("uncaught exception", 1)
  })
  process.on("unhandledRejection", (error) => {
    console.error(error)
    bail("unhandled rejection", 1)
  })
  process.on("exit", () => {
    for (const child of liveChildren) {
      try {
        child.kill("SIGKILL")
      } catch {
        // keep going
      }
    }
  })
}

// ---------------------------------------------------------------------------------------------------------------
// spawning

export interface SpawnOptions {
  readonly env: Record<string, string>
  readonly cwd?: string
  /** Open an IPC channel (for our own children: bench/agent.ts, bench/paywall.ts). */
  readonly ipc?: boolean
  /** Echo the child's output to our stderr, prefixed. */
  readonly echo?: boolean
}

/** Environment variables a child may inherit; everything else (e.g. a DATABASE_URL in the shell) is left out. */
export const baseEnv = (): Record<string, string> => {
  const keep = ["PATH", "HOME", "LANG", "TMPDIR", "TZ", "USER"]
  return Object.fromEntries(keep.flatMap((k) => (process.env[k] === undefined ? [] : [[k, process.env[k] as string]])))
}

export const spawnChild = (name: string, command: string, args: ReadonlyArray<string>, options: SpawnOptions): Child => {
  const child = spawn(command, args, {
    env: options.env,
    cwd: options.cwd ?? process.cwd(),
    stdio: options.ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"]
  })
  if (child.pid === undefined) throw new Error(`${name}: spawn failed`)
  const pid = child.pid
  liveChildren.add(child)
  let output = ""
  let outputBytes = 0
  const append = (chunk: string) => {
    outputBytes += Buffer.byteLength(chunk)
    output = (output + chunk).slice(-OUTPUT_LIMIT)
    if (options.echo) process.stderr.write(chunk.replace(/^(?=.)/gm, `  [${name}] `))
  }
  child.stdout?.setEncoding("utf8")
  child.stderr?.setEncoding("utf8")
  child.stdout?.on("data", append)
  child.stderr?.on("data", append)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      liveChildren.delete(child)
      resolve({ code, signal })
    })
  })
  child.once("error", (error) => append(`spawn error: ${error.message}\n`))
  const alive = () => child.exitCode === null && child.signalCode === null

  let stopping: Promise<void> | undefined
  const stop = (graceMs = 10_000): Promise<void> =>
    (stopping ??= (async () => {
      if (alive()) {
        child.kill("SIGTERM")
        const timer = setTimeout(() => {
          if (alive()) child.kill("SIGKILL")
        }, graceMs)
        await exited
        clearTimeout(timer)
      }
      unregister()
    })())
  const unregister = onCleanup(name, () => stop())

  const message = (type: string, timeoutMs = 60_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanupListeners()
        reject(new Error(`${name}: no "${type}" message within ${timeoutMs} ms\n${output}`))
      }, timeoutMs)
      const onMessage = (m: unknown) => {
        if (typeof m === "object" && m !== null && "type" in m && m.type === type) {
          cleanupListeners()
          resolve(m as Record<string, unknown>)
        }
      }
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        cleanupListeners()
        reject(new Error(`${name} exited (code ${code}, signal ${signal}) before "${type}":\n${output}`))
      }
      const cleanupListeners = () => {
        clearTimeout(timer)
        child.off("message", onMessage)
        child.off("exit", onExit)
      }
      child.on("message", onMessage)
      child.once("exit", onExit)
    })

  return { name, process: child, pid, output: () => output, outputBytes: () => outputBytes, exited, alive, stop, message }
}
