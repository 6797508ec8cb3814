// Renders docs/errors.md from the error registry; `npm run docs:errors` writes it, a test keeps it current.
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { ErrorCodes } from "../domain/Errors.js"

export const errorDocsPath = fileURLToPath(new URL("../../docs/errors.md", import.meta.url))

export const renderErrorDocs = (): string => {
  const rows = Object.entries(ErrorCodes)
    .sort(([a, x], [b, y]) => x.status - y.status || a.localeCompare(b))
    .map(([code, { meaning, status }]) => `| ${status} | \`${code}\` | ${meaning} |`)
  return [
    "# Error codes",
    "",
    "Generated from `src/domain/Errors.ts` by `npm run docs:errors`; `test/errors.test.ts` fails when this file is stale.",
    "",
    "Every failure is `{\"success\": false, \"error\": {\"code\", \"message\", \"details\"?}}`. A 402 is also an x402 v1 challenge",
    "(`x402Version`, `accepts`), with `error.details.reason` naming why a payment was refused (x402 reason names where one exists).",
    "",
    "| HTTP | code | meaning |",
    "|---|---|---|",
    ...rows,
    ""
  ].join("\n")
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  fs.writeFileSync(errorDocsPath, renderErrorDocs())
  console.log(`wrote ${errorDocsPath}`)
}
