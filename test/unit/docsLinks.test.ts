// Every relative link in the README and the docs names a file that exists and, with a #fragment, a heading of that
// file (GitHub's anchor for it): a moved or renamed section fails here instead of leaving a reader at a dead link.
import { describe, expect, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))

const markdownUnder = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? markdownUnder(path) : name.endsWith(".md") ? [path] : []
  })

const documents = [join(root, "README.md"), join(root, "sdk/README.md"), join(root, "bench/analysis.md"), ...markdownUnder(join(root, "docs"))]

/** The text outside fenced code blocks and inline code spans. */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "")

/** GitHub's heading anchor: lower case, punctuation dropped (hyphens and underscores kept), spaces to hyphens. */
const slug = (heading: string) =>
  heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, "").replace(/ /g, "-")

const anchorsOf = (file: string): Set<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const match of readFileSync(file, "utf8").replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug((match[1] ?? "").replace(/`/g, ""))
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

const linksOf = (file: string) =>
  [...prose(readFileSync(file, "utf8")).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] ?? "")
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))

describe("links in the README and docs", () => {
  it("finds the documents and their links", () => {
    expect(documents.length).toBeGreaterThan(20)
    expect(documents.flatMap(linksOf).length).toBeGreaterThan(50)
  })

  it("every relative link resolves to a file, and every #anchor to a heading in it", () => {
    const broken: Array<string> = []
    for (const file of documents) {
      for (const target of linksOf(file)) {
        const [path = "", fragment] = target.split("#")
        const resolved = path === "" ? file : resolve(dirname(file), decodeURIComponent(path))
        const where = `${relative(root, file)} → ${target}`
        if (!existsSync(resolved)) broken.push(`${where}: no such file`)
        else if (fragment !== undefined && resolved.endsWith(".md") && !anchorsOf(resolved).has(fragment)) {
          broken.push(`${where}: no heading with that anchor`)
        }
      }
    }
    expect(broken).toEqual([])
  })
})
