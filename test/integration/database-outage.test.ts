// PostgreSQL stops answering (SIGSTOP of the server and its backends): /health says so within 2 s, requests fail with
// 503 SERVICE_UNAVAILABLE in bounded time instead of hanging, and the service recovers on its own.
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { execFileSync } from "node:child_process"
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startEmbeddedPostgres } from "../../layers/embeddedPostgres.js"
import { call } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"

/** A PostgreSQL of this file's own (pausing the run's shared server would stall every other test). */
const OwnPostgres = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = await mkdtemp(join(tmpdir(), "marketplace-outage-"))
    await chmod(dir, 0o755)
    const dataDir = join(dir, "pg")
    const server = await startEmbeddedPostgres({ databaseDir: dataDir, persistent: false, unsafeFast: true, database: "outage" })
    return { server, dir, dataDir }
  }),
  ({ server, dir }) => Effect.promise(async () => {
    await server.stop().catch(() => undefined)
    await rm(dir, { recursive: true, force: true })
  })
)

/** The postmaster and every backend it forked. */
const serverPids = async (dataDir: string) => {
  const postmaster = Number((await readFile(join(dataDir, "postmaster.pid"), "utf8")).split("\n")[0])
  const children = execFileSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" }).split("\n").filter((l) => l.trim() !== "").map(Number)
  return [postmaster, ...children]
}

const signal = (pids: ReadonlyArray<number>, sig: NodeJS.Signals) => {
  for (const pid of pids) {
    try {
      process.kill(pid, sig)
    } catch { /* gone */ }
  }
}

const timed = <A>(f: () => Promise<A>) =>
  Effect.promise(async () => {
    const started = Date.now()
    const result = await f()
    return { result, ms: Date.now() - started }
  })

class OutageDir extends Context.Tag("test/OutageDir")<OutageDir, string>() {}

const Env = Layer.unwrapScoped(
  Effect.map(OwnPostgres, ({ server, dataDir }) =>
    Layer.merge(
      TestApp({ DATABASE_URL: server.url, DATABASE_QUERY_TIMEOUT_MS: "1000", DATABASE_CONNECT_TIMEOUT_MS: "1000", BACKGROUND_WORKERS: "false" }),
      Layer.succeed(OutageDir, dataDir)
    ))
)


layer(Env, { excludeTestServices: true })("PostgreSQL not answering", (it) => {
  it.scoped("health answers 503 within 2 s, requests 503 SERVICE_UNAVAILABLE in bounded time, and both recover", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const dataDir = yield* OutageDir
      expect((yield* Effect.promise(() => call(`${baseUrl}/health`))).status).toBe(200)
      const pids = yield* Effect.promise(() => serverPids(dataDir))
      yield* Effect.acquireRelease(Effect.sync(() => signal(pids, "SIGSTOP")), () => Effect.sync(() => signal(pids, "SIGCONT")))

      const health = yield* timed(() => call(`${baseUrl}/health`))
      expect(health.result.status).toBe(503)
      expect(health.result.body.error?.code).toBe("SERVICE_UNAVAILABLE")
      expect(health.ms).toBeLessThan(2_000)

      const read = yield* timed(() => call(`${baseUrl}/api/v1/agents/${crypto.randomUUID()}`))
      expect(read.result.status).toBe(503)
      expect(read.result.body.error?.code).toBe("SERVICE_UNAVAILABLE")
      expect(read.ms).toBeLessThan(8_000)

      signal(pids, "SIGCONT")
      // Recovery without a restart: the dropped connections are replaced.
      let status = 0
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = (yield* Effect.promise(() => call(`${baseUrl}/health`))).status
        if (status !== 200) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
      }
      expect(status).toBe(200)
      expect((yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${crypto.randomUUID()}`))).status).toBe(404)
    }))
})
