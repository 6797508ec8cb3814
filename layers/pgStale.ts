// A server left behind by a parent killed with SIGKILL: an orphaned postmaster or a stale postmaster.pid in the cluster.
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { EmbeddedPostgresError } from "./pgErrors.js"

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const parentPid = async (pid: number): Promise<number | undefined> => {
  const stat = await fs.readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined)
  if (stat === undefined) return undefined
  // Fields after the parenthesised command name: state ppid ...
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const ppid = Number(rest[1])
  return Number.isFinite(ppid) ? ppid : undefined
}

/**
 * A parent killed with SIGKILL leaves postgres running (orphaned, re-parented to init) or a stale
 * `postmaster.pid`. Stop an orphan, remove a stale pid file, and refuse when a live service still owns the directory.
 */
export const clearStaleServer = async (databaseDir: string): Promise<void> => {
  const pidFile = path.join(databaseDir, "postmaster.pid")
  const content = await fs.readFile(pidFile, "utf8").catch(() => undefined)
  if (content === undefined) return
  const pid = Number(content.split("\n")[0])
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) {
    await fs.rm(pidFile, { force: true })
    return
  }
  const ppid = await parentPid(pid)
  if (ppid !== undefined && ppid !== 1 && isAlive(ppid)) {
    const owner = await fs.readFile(`/proc/${ppid}/cmdline`, "utf8").catch(() => "")
    if (!owner.includes("node") && !owner.includes("tsx")) {
      // Re-parented to a subreaper (e.g. a container's init): treat as orphaned.
    } else {
      throw new EmbeddedPostgresError(
        `The PostgreSQL data directory ${databaseDir} is in use by another running service (postgres pid ${pid}, parent pid ${ppid}). Stop it or choose another DATA_DIR.`
      )
    }
  }
  process.kill(pid, "SIGINT")
  for (let i = 0; i < 200 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 25))
  if (isAlive(pid)) process.kill(pid, "SIGKILL")
  await fs.rm(pidFile, { force: true })
}
