// A bench's own section of docs/performance.md, between `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->`:
// replaced in place, or appended; the main bench (report.ts) keeps these sections when it rewrites the file.
import { readFile, writeFile } from "node:fs/promises"

export const writeSection = async (file: string, name: string, body: string) => {
  const start = `<!-- bench:${name}:start -->`
  const end = `<!-- bench:${name}:end -->`
  const current = await readFile(file, "utf8").catch(() => "")
  const at = current.indexOf(start)
  const until = current.indexOf(end)
  const block = `${start}\n${body}\n${end}`
  const next = at >= 0 && until > at ? `${current.slice(0, at)}${block}${current.slice(until + end.length)}` : `${current.trimEnd()}\n\n${block}\n`
  await writeFile(file, next, "utf8")
}
