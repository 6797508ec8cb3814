// docs/clients.md's code blocks marked `<!-- from FILE#REGION -->` are verbatim copies of the `// #region REGION`
// blocks of the tests that run them: a snippet that drifts from its test fails here.
import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))
const read = (path: string) => readFileSync(`${root}${path}`, "utf8")

/** Removes the indentation every non-blank line shares. */
const dedent = (text: string) => {
  const lines = text.replace(/\s+$/, "").split("\n")
  const indent = Math.min(...lines.filter((l) => l.trim() !== "").map((l) => l.length - l.trimStart().length))
  return lines.map((l) => l.slice(indent)).join("\n")
}

const regionOf = (source: string, region: string) => {
  const start = source.indexOf(`// #region ${region}\n`)
  if (start < 0) return undefined
  const body = source.slice(source.indexOf("\n", start) + 1)
  return dedent(body.slice(0, body.search(/^\s*\/\/ #endregion/m)))
}

describe("docs/clients.md", () => {
  const docs = read("docs/clients.md")
  const snippets = [...docs.matchAll(/<!-- from ([^#\s]+)#(\S+) -->\n```ts\n([\s\S]*?)```/g)]

  it("has snippets taken from tests", () => {
    expect(snippets.length).toBeGreaterThanOrEqual(2)
  })

  it("has the snippets of paying with x402 v2 over HTTP, by channel and over MCP", () => {
    const regions = snippets.map((m) => `${m[1]}#${m[2]}`)
    expect(regions).toEqual(expect.arrayContaining([
      "test/integration/x402-v2.test.ts#docs:x402-v2-pay",
      "test/integration/mcp-paid.test.ts#docs:mcp-connect",
      "test/integration/mcp-paid.test.ts#docs:mcp-x402-payer",
      "test/integration/receipts.test.ts#docs:receipt-check",
      "test/integration/receipts.test.ts#docs:receipt-read",
      "test/support/channelClient.ts#docs:channel-client",
      "test/integration/channel-official-client.test.ts#docs:channel-pay",
      "test/integration/channel-official-client.test.ts#docs:channel-refund",
      "test/support/uptoClient.ts#docs:upto-client",
      "test/integration/upto-calls.test.ts#docs:upto-pay"
    ]))
  })

  it.each(snippets.map((m) => [`${m[1]}#${m[2]}`, m[1] ?? "", m[2] ?? "", m[3] ?? ""]))("%s is a verbatim copy of its test region", (_name, file, region, snippet) => {
    expect(dedent(snippet)).toBe(regionOf(read(file), region))
  })
})
