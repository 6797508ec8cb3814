// Measures the seams between features: imports between service folders, and which folders write each table.
// `npx tsx src/tools/importGraph.ts` prints both as Markdown tables (docs/architecture.md, "Who writes which table").
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

const walk = (dir: string): ReadonlyArray<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : path.endsWith(".ts") ? [path] : []
  })

/** The feature a file belongs to: `services/<name>`, or the top folder (`src`, `machines`, `layers`). */
export const featureOf = (file: string): string => {
  const parts = relative(root, file).split(sep)
  return parts[0] === "services" ? `services/${parts[1]}` : parts[0]!
}

export interface ImportEdge { readonly from: string; readonly to: string; readonly file: string; readonly target: string }

/** Every `import … from "../<folder>/…"` (and `export … from`) between two service folders. */
export const serviceImports = (): ReadonlyArray<ImportEdge> =>
  walk(join(root, "services")).flatMap((file) => {
    const from = featureOf(file)
    const text = readFileSync(file, "utf8")
    return [...text.matchAll(/(?:import|export)\s[^;]*?from\s+"(\.\.\/[^"]+)"/g)].flatMap((m) => {
      const target = join(file, "..", m[1]!)
      const to = featureOf(target)
      return to !== from && to.startsWith("services/") ? [{ from, to, file: relative(root, file), target: m[1]! }] : []
    })
  })

// INSERT INTO t / UPDATE t / DELETE FROM t in SQL, and the UnitOfWork helpers that name their table.
const writePatterns: ReadonlyArray<RegExp> = [
  /\b(?:INSERT\s+INTO|DELETE\s+FROM)\s+([a-z_]+)/gi,
  /(?<!\b(?:FOR|DO|NO|KEY)\s+)\bUPDATE\s+([a-z_]+)\s+(?:AS\s+[a-z_]+\s+)?SET\b/gi,
  /(?<!\b(?:FOR|DO|NO|KEY)\s+)\bUPDATE\s+([a-z_]+)\s+[a-z_]\s+SET\b/gi,
  /UnitOfWork\.(?:insert|update|keyed)\(\s*sql\s*,\s*"([a-z_]+)"/g,
  /UnitOfWork\.inserts\(\s*sql\s*,\s*\[\["([a-z_]+)"/g,
  /UnitOfWork\.inserts\(\s*sql\s*,\s*\[\[[^\n]*?\],\s*\["([a-z_]+)"/g
]

/** For every table, the features whose files hold a statement writing it. */
export const tableWriters = (): ReadonlyMap<string, ReadonlySet<string>> => {
  const writers = new Map<string, Set<string>>()
  for (const dir of ["services", "src", "machines"]) {
    for (const file of walk(join(root, dir))) {
      if (file.includes(`${sep}tools${sep}`) || file.endsWith(`${sep}UnitOfWork.ts`)) continue
      const text = readFileSync(file, "utf8")
      for (const pattern of writePatterns) {
        for (const m of text.matchAll(pattern)) {
          const table = m[1]!.toLowerCase()
          if (["set", "the", "a", "of", "it", "one", "its"].includes(table)) continue
          const set = writers.get(table) ?? new Set<string>()
          set.add(featureOf(file))
          writers.set(table, set)
        }
      }
    }
  }
  return writers
}

const main = () => {
  const edges = serviceImports()
  const pairs = new Map<string, number>()
  for (const e of edges) pairs.set(`${e.from} -> ${e.to}`, (pairs.get(`${e.from} -> ${e.to}`) ?? 0) + 1)
  console.log(`## Imports between service folders: ${edges.length} statements, ${pairs.size} folder pairs\n`)
  console.log("| from -> to | imports |\n|---|---|")
  for (const [pair, n] of [...pairs].sort()) console.log(`| ${pair} | ${n} |`)
  const ec = edges.filter((e) => [e.from, e.to].every((f) => f === "services/executions" || f === "services/chains"))
  console.log(`\nexecutions <-> chains: ${ec.length}`)
  for (const e of ec) console.log(`- ${e.file} imports ${e.target}`)
  const writers = tableWriters()
  const multi = [...writers].filter(([, s]) => s.size > 1)
  console.log(`\n## Tables and the folders that write them: ${writers.size} tables, ${multi.length} written by more than one\n`)
  console.log("| table | written in |\n|---|---|")
  for (const [table, set] of [...writers].sort(([a], [b]) => a.localeCompare(b))) {
    console.log(`| \`${table}\` | ${[...set].sort().map((f) => `\`${f}\``).join(", ")} |`)
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) main()
