// `npx tsx bench/idle.ts`: idle RSS of the service (the bundle, as `npm start` runs it) 3 s after /health answers, as
// bench:levers' step 1 measures it, for several variants alternated over rounds (noise is ~5 MiB a run), with the
// /proc/PID/smaps_rollup breakdown. IDLE_VARIANTS='[{"label":"base"},{"label":"arenas","env":{"MALLOC_ARENA_MAX":"2"}},
// {"label":"semi8","nodeArgs":["--max-semi-space-size=8"]}]' (default: one "base"), IDLE_ROUNDS (3), IDLE_WAIT_MS (3000),
// IDLE_SNAPSHOT (1: a heap snapshot of each idle server, see snapshot()), IDLE_CHECK (1: then GET /openapi.json and /docs).
import { readdirSync, readFileSync, statSync } from "node:fs"
import { cleanupAll, installSignalHandlers } from "./lib/children.js"
import { intEnv, log, sleep } from "./lib/params.js"
import { memoryKb } from "./lib/proc.js"
import { servingPid, startInfra, startMarketplace } from "./lib/servers.js"

interface Variant {
  readonly label: string
  readonly env?: Record<string, string>
  readonly nodeArgs?: ReadonlyArray<string>
}

const variants: ReadonlyArray<Variant> = JSON.parse(process.env["IDLE_VARIANTS"] ?? "[{\"label\":\"base\"}]")
const rounds = intEnv("IDLE_ROUNDS", 3)
const waitMs = intEnv("IDLE_WAIT_MS", 3_000)

/** smaps_rollup's fields in MiB (Rss, Anonymous, Shared/Private clean/dirty). */
const rollup = (pid: number): Record<string, number> => {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8")
  const fields: Record<string, number> = {}
  for (const m of text.matchAll(/^(\w+):\s+(\d+) kB/gm)) fields[m[1]!] = Math.round(Number(m[2]) / 102.4) / 10
  return fields
}

/** IDLE_SNAPSHOT=1 (with nodeArgs ["--heapsnapshot-signal=SIGUSR2"]): a heap snapshot of the idle server in its cwd. */
const snapshot = async (pid: number) => {
  const before = new Set(readdirSync(".").filter((f) => f.endsWith(".heapsnapshot")))
  process.kill(pid, "SIGUSR2")
  for (let i = 0; i < 600; i++) {
    await sleep(500)
    const fresh = readdirSync(".").filter((f) => f.endsWith(".heapsnapshot") && !before.has(f))
    if (fresh.length > 0 && i > 4) {
      const size = statSync(fresh[0]!).size
      await sleep(1_000)
      if (statSync(fresh[0]!).size === size) return log(`heap snapshot: ${fresh[0]}`)
    }
  }
}

const main = async () => {
  installSignalHandlers()
  const infra = await startInfra()
  const results = new Map<string, Array<number>>()
  try {
    for (let round = 0; round < rounds; round++) {
      for (const v of variants) {
        const server = await startMarketplace(infra, { name: `idle ${v.label}`, env: v.env ?? {}, nodeArgs: v.nodeArgs ?? [] })
        try {
          const pid = servingPid(server)
          await sleep(waitMs)
          const rss = (memoryKb(pid)?.rss ?? 0) / 1024
          const r = rollup(pid)
          results.set(v.label, [...(results.get(v.label) ?? []), rss])
          if (process.env["IDLE_STATS"] === "1") {
            process.kill(pid, "SIGWINCH")
            await sleep(1500)
            log(readFileSync(`/tmp/idlerss-stats-${pid}.txt`, "utf8"))
          }
          if (process.env["IDLE_WAIT2_MS"] !== undefined) {
            await sleep(Number(process.env["IDLE_WAIT2_MS"]))
            log(`  ${process.env["IDLE_WAIT2_MS"]} ms later: RSS ${((memoryKb(pid)?.rss ?? 0) / 1024).toFixed(1)} MiB`)
            if (process.env["IDLE_STATS"] === "1") {
              process.kill(pid, "SIGWINCH")
              await sleep(1500)
              log(readFileSync(`/tmp/idlerss-stats-${pid}.txt`, "utf8"))
            }
          }
          if (process.env["IDLE_CHECK"] === "1") {
            // What is loaded lazily still answers after an idle start.
            for (const [route, expected] of [["/health", "ok"], ["/openapi.json", "\"openapi\""], ["/docs", "SwaggerUIBundle("]] as const) {
              const response = await fetch(`${server.origin}${route}`, { signal: AbortSignal.timeout(20_000) }).catch((e) => {
                throw new Error(`GET ${route}: ${String(e)}\n${server.child.output()}`)
              })
              const text = await response.text()
              log(`  GET ${route}: ${response.status}, ${text.length} chars, ${text.includes(expected) ? "as expected" : "UNEXPECTED BODY"}`)
            }
            log(`  after /docs: RSS ${((memoryKb(pid)?.rss ?? 0) / 1024).toFixed(1)} MiB`)
          }
          if (process.env["IDLE_SNAPSHOT"] === "1") await snapshot(pid)
          log(`${v.label} round ${round + 1}: idle RSS ${rss.toFixed(1)} MiB (anon ${r["Anonymous"]}, shared clean ${r["Shared_Clean"]}, private clean ${r["Private_Clean"]}, private dirty ${r["Private_Dirty"]})`)
        } finally {
          await server.child.stop()
        }
      }
    }
  } finally {
    await cleanupAll()
  }
  for (const [label, xs] of results) {
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length
    console.log(`${label.padEnd(20)} mean ${mean.toFixed(1)} MiB  runs ${xs.map((x) => x.toFixed(1)).join(", ")}`)
  }
}

main().catch(async (e) => {
  console.error(e)
  await cleanupAll()
  process.exit(1)
})
