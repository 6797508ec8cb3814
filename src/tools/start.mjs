// `npm start`: the service from its bundle (dist/main.mjs), rebuilt first when a source changed (see build.mjs). The
// build runs in a child process: esbuild and the output buffers it returns (~30 MB) never enter the server's memory.
import { spawnSync } from "node:child_process"
import { fileURLToPath, pathToFileURL } from "node:url"
import { bundlePath, isFresh } from "./build.mjs"

if (!isFresh()) {
  const built = spawnSync(process.execPath, [fileURLToPath(new URL("./build.mjs", import.meta.url))], { stdio: ["ignore", "ignore", "inherit"] })
  if (built.status !== 0 || !isFresh()) {
    // esbuild has printed the source errors; say what failed in one line.
    console.error(`agent marketplace could not start: the build of src/main.ts failed${built.error === undefined ? "" : `: ${built.error.message}`}`)
    process.exit(1)
  }
}
await import(pathToFileURL(bundlePath).href)
