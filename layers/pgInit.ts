// A new cluster for a DATA_DIR: copied from a template cluster made once per machine and PostgreSQL build (initdb takes
// 2-2.6 s on two cores, a copy a fraction of that); the template's superuser password is replaced at first start.
import { spawn, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { type PgPlacement, stagingRoot } from "./pgAccess.js"
import { EmbeddedPostgresError } from "./pgErrors.js"

/** Inside the template cluster (copied with it, removed from each copy): the template's superuser password. */
const TEMPLATE_PASSWORD_FILE = "marketplace-template.password"

/** Runs a binary to completion as the placement's user; rejects with its output. */
export const run = (placement: PgPlacement, bin: string, args: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(path.join(placement.binDir, bin), args, { ...placement.ids, env: { ...process.env, LC_ALL: "C" }, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output = (output + chunk.toString("utf8")).slice(-4_000)))
    child.stderr.on("data", (chunk: Buffer) => (output = (output + chunk.toString("utf8")).slice(-4_000)))
    child.on("error", (error) => reject(new EmbeddedPostgresError(`${bin} could not be started: ${error.message}`)))
    child.on("close", (code) => (code === 0 ? resolve() : reject(new EmbeddedPostgresError(`${bin} failed (exit ${code}): ${output.trim()}`))))
  })

/** initdb into `dataDir` with `password` for the postgres superuser. */
export const initialise = async (placement: PgPlacement, dataDir: string, password: string) => {
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 })
  if (placement.ids !== undefined) await fs.chown(dataDir, placement.ids.uid, placement.ids.gid)
  // The password file must be readable by initdb's user; it lives beside the cluster, never in a shared directory.
  const pwfile = path.join(dataDir, "..", `.${path.basename(dataDir)}.pwfile`)
  await fs.writeFile(pwfile, `${password}\n`, { mode: 0o600 })
  if (placement.ids !== undefined) await fs.chown(pwfile, placement.ids.uid, placement.ids.gid)
  try {
    await run(placement, "initdb", [`--pgdata=${dataDir}`, "--auth=scram-sha-256", "--username=postgres", `--pwfile=${pwfile}`, "--encoding=UTF8", "--locale=C"])
  } finally {
    await fs.rm(pwfile, { force: true })
  }
}

/** The template for this build of PostgreSQL (made now if missing; several processes may race: one rename wins). */
const template = async (placement: PgPlacement): Promise<{ readonly dir: string; readonly password: string }> => {
  const root = placement.ids === undefined ? os.tmpdir() : await stagingRoot()
  const build = createHash("sha256").update(placement.binDir).digest("hex").slice(0, 12)
  const dir = path.join(root, `agent-marketplace-pg-template-${build}-${process.getuid?.() ?? 0}`)
  const read = () => fs.readFile(path.join(dir, TEMPLATE_PASSWORD_FILE), "utf8").then((s) => s.trim(), () => undefined)
  const existing = await read()
  if (existing !== undefined) return { dir, password: existing }
  const password = randomBytes(18).toString("base64url")
  const building = `${dir}.tmp-${randomBytes(6).toString("hex")}`
  try {
    await initialise(placement, building, password)
    const file = path.join(building, TEMPLATE_PASSWORD_FILE)
    await fs.writeFile(file, password, { mode: 0o600 })
    if (placement.ids !== undefined) await fs.chown(file, placement.ids.uid, placement.ids.gid)
    await fs.rename(building, dir)
    return { dir, password }
  } catch (error) {
    await fs.rm(building, { recursive: true, force: true })
    const other = await read() // another process made it first
    if (other !== undefined) return { dir, password: other }
    throw error
  }
}

/**
 * A fresh cluster in `dataDir`, copied from the template (ownership kept: `cp -a`); when no template can be made or
 * copied, initdb runs here directly. Returns the superuser password the cluster has now, and whether it is the
 * template's (then the caller replaces it once the server runs).
 */
export const createCluster = async (placement: PgPlacement, dataDir: string): Promise<{ readonly password: string; readonly shared: boolean }> => {
  await fs.rm(dataDir, { recursive: true, force: true })
  const made = await template(placement).catch(() => undefined)
  if (made !== undefined) {
    const copied = spawnSync("cp", ["-a", made.dir, dataDir], { stdio: "ignore", timeout: 60_000 })
    if (copied.status === 0) {
      await fs.rm(path.join(dataDir, TEMPLATE_PASSWORD_FILE), { force: true })
      return { password: made.password, shared: true }
    }
    await fs.rm(dataDir, { recursive: true, force: true })
  }
  const password = randomBytes(18).toString("base64url")
  await initialise(placement, dataDir, password)
  return { password, shared: false }
}
