// Callback SSRF by DNS rebinding: a callback name that resolves to a public address when checked and to 127.0.0.1 when
// connecting is refused at connect time. Callbacks are webhook deliveries (target 'callback'), posted by the one sender.
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { AppConfig, type AppConfigShape } from "../../layers/Config.js"
import { testAppConfig } from "../support/config.js"
import { HostResolver, type ResolvedAddress } from "../../layers/outbound/HostResolver.js"
import { OutboundPool } from "../../layers/outbound/Pool.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { DeliveriesRepo } from "../../services/webhooks/DeliveriesRepo.js"
import { WebhooksRepo } from "../../services/webhooks/Repo.js"
import { WebhookSecrets } from "../../services/webhooks/Secrets.js"
import { Sender } from "../../services/webhooks/Sender.js"
import { DeliveryTargets } from "../../services/webhooks/Targets.js"
import { fakeAgent } from "../support/agents.js"
import { devAccount } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const REBINDING_HOST = "rebind.attacker.test"

/** Polls until `check` passes (the execution finishes in a background fiber). */
const eventually = <A, E>(effect: Effect.Effect<A, E>, check: (a: A) => boolean) =>
  effect.pipe(
    Effect.filterOrFail(check, () => "not yet" as const),
    Effect.retry(Schedule.spaced("25 millis").pipe(Schedule.intersect(Schedule.recurs(200)))),
    Effect.orDie
  )

/** A local HTTP listener that counts every TCP connection and every request it sees. */
const localListener = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ server: http.Server; port: number; seen: { connections: number; requests: number } }>((resolve) => {
      const seen = { connections: 0, requests: 0 }
      const server = http.createServer((req, res) => {
        seen.requests++
        req.resume()
        req.on("end", () => res.writeHead(200).end("ok"))
      })
      server.on("connection", () => seen.connections++)
      server.listen(0, "127.0.0.1", () => resolve({ server, port: (server.address() as AddressInfo).port, seen }))
    })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const appConfig = (allowPrivateUrls: boolean): AppConfigShape => testAppConfig({ allowPrivateUrls })

/**
 * The real sender over the test's database (and the app's machine host), with its own URL policy and a scripted
 * resolver: the resolver answers the n-th lookup of a name with `answers[n]` (the last one repeats) and records every lookup.
 */
const scriptedSender = (sql: SqlClient.SqlClient, allowPrivateUrls: boolean, answers: ReadonlyArray<string>) => {
  const lookups: Array<string> = []
  const resolver = HostResolver.make({
    lookup: (hostname: string): Promise<ReadonlyArray<ResolvedAddress>> => {
      const address = answers[Math.min(lookups.length, answers.length - 1)] ?? "0.0.0.0"
      lookups.push(`${hostname} -> ${address}`)
      return Promise.resolve([{ address, family: 4 }])
    }
  })
  const live = Sender.DefaultWithoutDependencies.pipe(
    Layer.provide(Layer.mergeAll(UrlGuard.DefaultWithoutDependencies, OutboundPool.DefaultWithoutDependencies, DeliveriesRepo.Default, DeliveryTargets.DefaultWithoutDependencies)),
    Layer.provide(Layer.mergeAll(WebhooksRepo.Default, WebhookSecrets.Default)),
    Layer.provide(
      Layer.mergeAll(
        Layer.succeed(HostResolver, resolver),
        Layer.succeed(AppConfig, appConfig(allowPrivateUrls)),
        Layer.succeed(SqlClient.SqlClient, sql)
      )
    )
  )
  return { live, lookups }
}

interface CallbackRow {
  readonly status: string
  readonly attempts: number
  readonly lastStatus: number | null
  /** The last attempt's logged error. */
  readonly lastError: string | null
}

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { excludeTestServices: true })("callbacks and DNS rebinding", (it) => {
  /** A completed paid execution whose callback waits, pointed at `http://<name>:<port>/hook` of the local listener. */
  const pendingCallbackTo = (hostname: string, port: number, payer: number) =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(payer + 1), agent.url, { tier: "premium" })
      // Armed with a loopback URL (the test server allows private URLs), then renamed: the workers are off, nothing posts it meanwhile.
      const response = yield* execute(devAccount(payer), {
        targetAgentId: agentId,
        capabilityId: "echo",
        input: { text: "call me" },
        callbackUrl: `http://127.0.0.1:${port}/hook`
      })
      expect(response.status).toBe(202)
      const requestId: string = response.body.data.requestId
      yield* eventually(
        sql<{ status: string }>`SELECT status FROM webhook_deliveries WHERE execution_id = ${requestId} AND target = 'callback'`,
        (rows) => rows[0]?.status === "pending"
      )
      // Earlier tests' callbacks wait for their retries: parked, so that this test's pass sees its own only.
      yield* sql`UPDATE webhook_deliveries SET next_attempt_at = now() + interval '1 day' WHERE status = 'pending' AND execution_id <> ${requestId}`
      yield* sql`UPDATE webhook_deliveries SET url = ${`http://${hostname}:${port}/hook`} WHERE execution_id = ${requestId}`
      return requestId
    })

  const rowOf = (requestId: string) =>
    Effect.flatMap(TestEnv, ({ sql }) =>
      sql<CallbackRow>`
        SELECT d.status, d.attempt_count AS attempts, d.response_status AS last_status,
               (SELECT a.error_message FROM webhook_attempts a WHERE a.delivery_id = d.id ORDER BY a.attempt_number DESC LIMIT 1) AS last_error
        FROM webhook_deliveries d WHERE d.execution_id = ${requestId}`.pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      ))

  it.scoped("a name that passes the check on a public address and then rebinds to 127.0.0.1 is refused when the socket connects; nothing reaches the local listener", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const listener = yield* localListener
      const requestId = yield* pendingCallbackTo(REBINDING_HOST, listener.port, 2)
      const { live, lookups } = scriptedSender(sql, false, ["93.184.216.34", "127.0.0.1"])
      const started = Date.now()
      const processed = yield* Effect.flatMap(Sender, (sender) => sender.sendDue).pipe(Effect.provide(live))
      expect(processed).toBe(1)
      expect(Date.now() - started).toBeLessThan(5_000)
      // Checked once (public), then looked up again by the pool when connecting (loopback): refused there.
      expect(lookups).toEqual([`${REBINDING_HOST} -> 93.184.216.34`, `${REBINDING_HOST} -> 127.0.0.1`])
      const row = yield* rowOf(requestId)
      expect(row).toMatchObject({ status: "pending", attempts: 1, lastStatus: null })
      // The refusal says the host is not allowed, never what it resolved to (the log has that, for the operator).
      expect(row?.lastError).toContain(`host ${REBINDING_HOST} is not allowed`)
      expect(row?.lastError).not.toContain("127.0.0.1")
      expect(listener.seen).toEqual({ connections: 0, requests: 0 })
    }))

  it.scoped("the same name is delivered through the scripted resolver when private URLs are allowed (the pool connects where the lookup says)", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const listener = yield* localListener
      const requestId = yield* pendingCallbackTo(REBINDING_HOST, listener.port, 4)
      const { live, lookups } = scriptedSender(sql, true, ["127.0.0.1"])
      yield* Effect.flatMap(Sender, (sender) => sender.sendDue).pipe(Effect.provide(live))
      // ALLOW_PRIVATE_URLS skips the check; only the connect-time lookup runs.
      expect(lookups).toEqual([`${REBINDING_HOST} -> 127.0.0.1`])
      expect(yield* rowOf(requestId)).toMatchObject({ status: "delivered", attempts: 1, lastStatus: 200, lastError: null })
      expect(listener.seen.requests).toBe(1)
    }))

  it.scoped("a name that resolves to 127.0.0.1 from the start is refused by the check, before any connection", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const listener = yield* localListener
      const requestId = yield* pendingCallbackTo("localhost.attacker.test", listener.port, 6)
      const { live, lookups } = scriptedSender(sql, false, ["127.0.0.1"])
      yield* Effect.flatMap(Sender, (sender) => sender.sendDue).pipe(Effect.provide(live))
      expect(lookups).toHaveLength(1)
      expect((yield* rowOf(requestId))?.lastError).toContain("host localhost.attacker.test is not allowed")
      expect((yield* rowOf(requestId))?.lastError).not.toContain("127.0.0.1")
      expect(listener.seen).toEqual({ connections: 0, requests: 0 })
    }))
})
