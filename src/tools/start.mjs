// `npm start`: the service from its bundle (dist/main.mjs), rebuilt first when a source changed (see build.mjs), run
// under a supervisor (supervise.mjs) that serves no request: it restarts the server when it dies and stops what the dead
// server started. The build runs in a child process: esbuild and the output buffers it returns (~30 MB) never enter
// this process's memory. The server gets this process's Node options (`node --max-old-space-size=N src/tools/start.mjs`).
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { bundlePath, isFresh } from "./build.mjs"
import { supervise } from "./supervise.mjs"

if (!isFresh()) {
  const built = spawnSync(process.execPath, [fileURLToPath(new URL("./build.mjs", import.meta.url))], { stdio: ["ignore", "ignore", "inherit"] })
  if (built.status !== 0 || !isFresh()) {
    // esbuild has printed the source errors; say what failed in one line.
    console.error(`agent marketplace could not start: the build of src/main.ts failed${built.error === undefined ? "" : `: ${built.error.message}`}`)
    process.exit(1)
  }
}
process.exitCode = await supervise(bundlePath)
