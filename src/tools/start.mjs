// `npm start`: the service from its bundle (dist/main.mjs), rebuilt first when a source changed (see build.mjs).
import { pathToFileURL } from "node:url"
import { ensureBuilt } from "./build.mjs"

let main
try {
  main = await ensureBuilt()
} catch (error) {
  // esbuild has printed the source errors; say what failed in one line.
  console.error(`agent marketplace could not start: the build of src/main.ts failed: ${String(error?.message ?? error).split("\n")[0]}`)
  process.exit(1)
}
await import(pathToFileURL(main).href)
