// Cold start (`npm run bench:startup`): time from `npm start` (package.json's start script, run without npm) to a
// healthy /health, median of STARTUP_RUNS (5) runs, with an existing and with a fresh DATA_DIR; then where the time goes
// (loading the code, PostgreSQL, the devnet, the build after a source change). Writes the "Cold start" section of
// docs/performance.md (STARTUP_OUTPUT to write elsewhere, STARTUP_OUTPUT=- for stdout only) and leaves the rest alone;
// bench/startup-notes.md (hand-written) closes the section.
import { type ChildProcess, spawn } from "node:child_process"
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { readFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { startDevnet } from "../layers/devnet/anvil.js"
import { freePort, startEmbeddedPostgres } from "../layers/embeddedPostgres.js"
import { processTree } from "./lib/proc.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const RUNS = Number(process.env["STARTUP_RUNS"] ?? 5)
const OUTPUT = process.env["STARTUP_OUTPUT"] ?? path.join(ROOT, "docs", "performance.md")

const startCommand = (): { readonly command: string; readonly args: ReadonlyArray<string>; readonly script: string } => {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts?: Record<string, string> }
  const script = pkg.scripts?.["start"] ?? "tsx src/main.ts"
  const [bin = "node", ...args] = script.trim().split(/\s+/)
  return { command: bin === "node" ? process.execPath : path.join(ROOT, "node_modules", ".bin", bin), args, script }
}

const children = new Set<ChildProcess>()
const cleanup = () => {
  for (const child of children) child.kill("SIGKILL")
}
process.on("exit", cleanup)
process.on("SIGINT", () => process.exit(130))

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2
}
const stats = (xs: ReadonlyArray<number>) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), runs: xs })
type Stats = ReturnType<typeof stats>

const tempDir = async (prefix: string) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix))
  await chmod(dir, 0o755) // reachable by the postgres system user when run as root
  return dir
}

const CLOCK_TICKS = 100 // getconf CLK_TCK on Linux

/**
 * CPU time (ms) a process tree has used so far, including its children that already exited and were waited for
 * (initdb, staging): utime + stime + cutime + cstime of every live process in the tree.
 */
const treeCpuWithChildrenMs = (pid: number): number =>
  processTree(pid).reduce((sum, p) => {
    try {
      const text = readFileSync(`/proc/${p}/stat`, "utf8")
      const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
      const ticks = [11, 12, 13, 14].reduce((t, i) => t + Number(fields[i] ?? 0), 0)
      return sum + (ticks * 1000) / CLOCK_TICKS
    } catch {
      return sum
    }
  }, 0)

/** One `npm start`: milliseconds until /health says "ok" (wall and CPU of all its processes), and until it exited after SIGTERM. */
const startOnce = async (dataDir: string): Promise<{ healthyMs: number; cpuMs: number; stopMs: number }> => {
  const { command, args } = startCommand()
  const port = await freePort()
  const started = performance.now()
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), DEVNET_PORT: "0" },
    stdio: ["ignore", "ignore", "pipe"]
  })
  children.add(child)
  let stderr = ""
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  let done = false
  void exited.then(() => (done = true))
  try {
    for (;;) {
      if (done) throw new Error(`the service exited before it was healthy:\n${stderr}`)
      if (performance.now() - started > 60_000) throw new Error("not healthy within 60 s")
      const ok = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2_000) })
        .then(async (r) => r.ok && ((await r.json()) as { data?: { status?: string } }).data?.status === "ok", () => false)
      if (ok) break
      await new Promise((r) => setTimeout(r, 20))
    }
    const healthyMs = performance.now() - started
    const cpuMs = child.pid === undefined ? 0 : treeCpuWithChildrenMs(child.pid)
    const stopping = performance.now()
    child.kill("SIGTERM")
    await exited
    return { healthyMs, cpuMs, stopMs: performance.now() - stopping }
  } finally {
    child.kill("SIGKILL")
    children.delete(child)
  }
}

/** Process start to exit when the configuration is refused after every module has loaded: the cost of loading the code. */
const loadOnce = async (): Promise<number> => {
  const { command, args } = startCommand()
  const started = performance.now()
  const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, CHAIN_RPC_URL: "http://127.0.0.1:1" }, stdio: "ignore" })
  children.add(child)
  await new Promise<void>((resolve) => child.once("exit", () => resolve()))
  children.delete(child)
  return performance.now() - started
}

const time = async (body: () => Promise<unknown>) => {
  const started = performance.now()
  await body()
  return performance.now() - started
}

const ms = (x: number) => `${Math.round(x)}`
const row = (name: string, s: Stats) => `| ${name} | ${ms(s.median)} | ${ms(s.min)}–${ms(s.max)} | ${s.runs.map(ms).join(", ")} |`

const loadAverage = () => readFile("/proc/loadavg", "utf8").then((s) => s.split(" ").slice(0, 3).join(" "), () => "n/a")

const main = async () => {
  const loadStart = await loadAverage()
  const { script } = startCommand()
  console.log(`start script: ${script}; ${RUNS} runs each`)

  // The first start after a source change builds the bundle; measured once, then every run below starts from it.
  const buildMs = script.includes("start.mjs")
    ? await time(async () => {
      const { command, args } = { command: process.execPath, args: [path.join(ROOT, "src", "tools", "build.mjs")] }
      await new Promise<void>((resolve, reject) =>
        spawn(command, args, { cwd: ROOT, stdio: "ignore" }).once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`build exited ${code}`))))
      )
    })
    : undefined
  if (buildMs !== undefined) console.log(`build: ${ms(buildMs)} ms`)

  const load: Array<number> = []
  for (let i = 0; i < RUNS; i++) load.push(await loadOnce())
  console.log(`load: ${load.map(ms).join(", ")}`)

  const existingDir = await tempDir("startup-bench-existing-")
  const fresh: Array<number> = []
  const existing: Array<number> = []
  const freshCpu: Array<number> = []
  const existingCpu: Array<number> = []
  const stops: Array<number> = []
  try {
    await startOnce(existingDir) // creates the data directory that the "existing" runs reuse
    for (let i = 0; i < RUNS; i++) {
      const run = await startOnce(existingDir)
      existing.push(run.healthyMs)
      existingCpu.push(run.cpuMs)
      stops.push(run.stopMs)
      console.log(`existing #${i + 1}: ${ms(run.healthyMs)} ms, CPU ${ms(run.cpuMs)} ms (stop ${ms(run.stopMs)} ms)`)
    }
    for (let i = 0; i < RUNS; i++) {
      const dir = await tempDir("startup-bench-fresh-")
      try {
        const run = await startOnce(dir)
        fresh.push(run.healthyMs)
        freshCpu.push(run.cpuMs)
        stops.push(run.stopMs)
        console.log(`fresh #${i + 1}: ${ms(run.healthyMs)} ms, CPU ${ms(run.cpuMs)} ms (stop ${ms(run.stopMs)} ms)`)
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    }
  } finally {
    await rm(existingDir, { recursive: true, force: true })
  }

  // The parts, in this process (their code is loaded already): PostgreSQL and the devnet, fresh and existing.
  const parts = { pgFresh: [] as Array<number>, pgExisting: [] as Array<number>, devnetFresh: [] as Array<number>, devnetExisting: [] as Array<number> }
  for (let i = 0; i < RUNS; i++) {
    const dir = await tempDir("startup-bench-parts-")
    try {
      const pgDir = path.join(dir, "postgres")
      let server = await startEmbeddedPostgres({ databaseDir: pgDir, persistent: true })
      await server.stop()
      parts.pgFresh.push(await time(async () => (server = await startEmbeddedPostgres({ databaseDir: path.join(dir, "postgres2"), persistent: true }))))
      await server.stop()
      parts.pgExisting.push(await time(async () => (server = await startEmbeddedPostgres({ databaseDir: pgDir, persistent: true }))))
      await server.stop()
      const stateFile = path.join(dir, "devnet", "anvil-state.json")
      let devnet = await startDevnet({ stateFile: path.join(dir, "warm", "anvil-state.json") })
      await devnet.stop()
      parts.devnetFresh.push(await time(async () => (devnet = await startDevnet({ stateFile }))))
      await devnet.stop()
      parts.devnetExisting.push(await time(async () => (devnet = await startDevnet({ stateFile }))))
      await devnet.stop()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }

  const loadEnd = await loadAverage()
  const notes = await readFile(path.join(ROOT, "bench", "startup-notes.md"), "utf8").catch(() => "")
  const section = [
    "## Cold start",
    "",
    `Written by \`npm run bench:startup\` (bench/startup.ts) on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}; load average ${loadStart} at the start of the run and ${loadEnd} at its end (other work shares the machine: wall times grow with it, CPU times much less). ` +
    `Time from spawning \`${script}\` to the first \`/health\` that answers \`ok\` (polled every 20 ms), ${RUNS} runs each, in ms. ` +
    "*Existing*: a DATA_DIR from an earlier run (PostgreSQL cluster and devnet state present); *fresh*: an empty DATA_DIR (template cluster copied, deploy and mint).",
    "",
    "| | median | range | runs |",
    "|---|---|---|---|",
    row("**healthy, existing DATA_DIR** (target ≤ 2000)", stats(existing)),
    row("**healthy, fresh DATA_DIR** (target ≤ 4000)", stats(fresh)),
    row("CPU time of all its processes until healthy, existing", stats(existingCpu)),
    row("CPU time of all its processes until healthy, fresh", stats(freshCpu)),
    row("stop after SIGTERM (all runs)", stats(stops)),
    "",
    "Where the time goes (each part alone, same machine):",
    "",
    "| part | median | range | runs |",
    "|---|---|---|---|",
    row("load the code (process start to exit on a refused configuration)", stats(load)),
    row("embedded PostgreSQL, fresh (template copy + start + new password + create database)", stats(parts.pgFresh)),
    row("embedded PostgreSQL, existing cluster (start)", stats(parts.pgExisting)),
    row("devnet, fresh (anvil + deploy TestUSDC + 9 mints + state saved)", stats(parts.devnetFresh)),
    row("devnet, existing state (anvil loads it)", stats(parts.devnetExisting)),
    ...(buildMs === undefined ? [] : [`| build of the bundle (first start after a source change only) | ${ms(buildMs)} | | |`]),
    "",
    ...(notes === "" ? [] : [notes.trimEnd(), ""])
  ].join("\n")
  console.log(`\n${section}`)
  if (OUTPUT !== "-") {
    const current = await readFile(OUTPUT, "utf8").catch(() => "")
    const start = current.indexOf("## Cold start")
    const next = start < 0 ? -1 : current.indexOf("\n## ", start + 1)
    const updated = start < 0
      ? `${current.trimEnd()}\n\n${section}`
      : `${current.slice(0, start)}${section}${next < 0 ? "" : current.slice(next)}`
    await writeFile(OUTPUT, updated.endsWith("\n") ? updated : `${updated}\n`)
    console.log(`wrote the Cold start section of ${path.relative(process.cwd(), OUTPUT)}`)
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
