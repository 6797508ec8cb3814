// DATA_DIR made ready before anything writes under it: created one level at a time and probed with a real write, so an
// unusable directory is one clear error instead of Node's recursive mkdir spinning forever (it does under /proc).
import { Config, Data, Effect, Layer, Option } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { AppConfig } from "./Config.js"

export class DataDirError extends Data.TaggedError("DataDirError")<{ readonly message: string }> {}

const errnoCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined

const explain = (code: string | undefined): string => {
  switch (code) {
    case "EACCES":
    case "EPERM":
      return "permission denied"
    case "EROFS":
      return "read-only file system"
    case "ENOTDIR":
      return "a part of the path is a file, not a directory"
    case "ENOENT":
      // A missing directory whose parent exists: the file system does not allow new entries there (/proc, /sys).
      return "the file system there does not allow creating it"
    case "ENOSPC":
      return "no space left on the device"
    default:
      return code ?? "unknown error"
  }
}

/**
 * Creates `dir` when missing (each missing level with a plain, non-recursive mkdir) and checks that a file can be
 * written in it. Node's `mkdir(…, { recursive: true })` is not used: on a path under /proc it alternates ENOENT and
 * EEXIST forever, starving the event loop so that even SIGTERM is never handled (nodejs/node MKDirpAsync).
 *
 * @param setting the name shown in the message (e.g. "DATA_DIR").
 */
export const ensureWritableDir = async (dir: string, setting: string): Promise<void> => {
  const target = path.resolve(dir)
  const fail = (what: string, error: unknown): never => {
    throw new DataDirError({
      message: `${setting} ${target} is not usable: ${what} (${explain(errnoCode(error))}). Choose a writable ${setting}.`
    })
  }
  const missing: Array<string> = []
  for (let current = target; ; current = path.dirname(current)) {
    const stat = await fs.stat(current).catch((error: unknown) => (errnoCode(error) === "ENOENT" ? undefined : fail(`cannot read ${current}`, error)))
    if (stat !== undefined) {
      if (!stat.isDirectory()) fail(`${current} is not a directory`, { code: "ENOTDIR" })
      break
    }
    missing.unshift(current)
    if (path.dirname(current) === current) break
  }
  for (const level of missing) {
    await fs.mkdir(level).catch((error: unknown) => (errnoCode(error) === "EEXIST" ? undefined : fail(`cannot create ${level}`, error)))
  }
  const probe = path.join(target, `.write-test-${process.pid}-${randomBytes(4).toString("hex")}`)
  await fs.writeFile(probe, "").catch((error: unknown) => fail("cannot write in it", error))
  await fs.rm(probe, { force: true })
}

/**
 * Checks DATA_DIR before PostgreSQL and the devnet start, when either keeps its files there (embedded PostgreSQL when
 * DATABASE_URL is unset; the devnet's anvil unless CHAIN_RPC_URL or DEVNET_RPC_URL points elsewhere).
 */
export const DataDirReadyLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const attached = yield* Config.option(Config.string("DEVNET_RPC_URL"))
    const used = Option.isNone(config.databaseUrl) || (config.chainMode === "devnet" && Option.isNone(attached))
    if (!used) return
    yield* Effect.tryPromise({
      try: () => ensureWritableDir(config.dataDir, "DATA_DIR"),
      catch: (error) => (error instanceof DataDirError ? error : new DataDirError({ message: `DATA_DIR ${config.dataDir}: ${String(error)}` }))
    })
  })
)
