// `npm run lock:optional`: records in package-lock.json every optional platform package that a dependency pins to an
// exact version but the registry in use could not serve when the lockfile was written (npm >= 11.16 then leaves it out
// of the lockfile, and its own `npm ci` refuses that lockfile as out of sync: npm/cli#9846). Each is recorded by name
// and exact version only; `npm ci` fetches it by that version on the platforms that need it and skips it elsewhere.
// Run `npm install` afterwards: it keeps the entries and sets their dev/optional flags. `--check` only reports.
import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const lockPath = join(resolve(dirname(fileURLToPath(import.meta.url)), "..", ".."), "package-lock.json")
const lock = JSON.parse(readFileSync(lockPath, "utf8"))
const packages = lock.packages ?? {}

/** Where Node would look for `name` from the package at `from` (its own node_modules, then each parent's). */
const resolvesTo = (from, name) => {
  for (let dir = from; ; dir = dir.slice(0, Math.max(0, dir.lastIndexOf("/node_modules/")))) {
    const key = `${dir === "" ? "" : `${dir}/`}node_modules/${name}`
    if (packages[key] !== undefined) return key
    if (dir === "") return undefined
  }
}

const added = []
for (const [from, entry] of Object.entries(packages)) {
  for (const [name, spec] of Object.entries(entry.optionalDependencies ?? {})) {
    if (!/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(spec) || resolvesTo(from, name) !== undefined) continue
    const key = `node_modules/${name}`
    packages[key] = { version: spec, optional: true }
    added.push(`${name}@${spec}`)
  }
}
if (process.argv.includes("--check")) {
  // Nothing written: exit code 1 when the lockfile misses any of them (npm ci would refuse it).
  console.log(added.length === 0 ? "package-lock.json records every pinned optional package" : `missing from package-lock.json: ${added.join(", ")}`)
  process.exit(added.length === 0 ? 0 : 1)
}
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))))
writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`)
console.log(added.length === 0 ? "nothing to add" : `added ${added.length}: ${added.join(", ")}\nnow run: npm install`)
