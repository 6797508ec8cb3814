// The server's side of `npm start`'s supervisor (src/tools/supervise.mjs): say when it serves, and stop when the
// supervisor is gone (its IPC channel closes, however it died), so nothing the server started outlives them both.
import cluster from "node:cluster"

/** How long a server whose supervisor died gets to stop by itself before its whole process group is killed. */
const ORPHAN_GRACE_MS = 20_000

const supervised = () => !cluster.isWorker && process.env["MARKETPLACE_SUPERVISED"] === "1" && process.send !== undefined

/** Tells the supervisor that this server serves: from now on, its death is a crash to recover from, not a failed start. */
export const announceReady = () => {
  if (supervised()) process.send?.({ type: "ready" })
}

/**
 * When the supervisor's channel closes, stop as on SIGTERM (the runtime's interruption runs every finalizer: workers,
 * PostgreSQL, anvil); if that hangs, kill the process group this server leads (it and what it started).
 */
export const watchSupervisor = () => {
  if (!supervised()) return
  // The channel must not keep a stopping server alive.
  process.channel?.unref()
  process.once("disconnect", () => {
    console.error(`agent marketplace (pid ${process.pid}): the supervisor is gone; stopping`)
    setTimeout(() => {
      try {
        process.kill(-process.pid, "SIGKILL")
      } catch {
        process.exit(1)
      }
    }, ORPHAN_GRACE_MS).unref()
    process.kill(process.pid, "SIGTERM")
  })
}
