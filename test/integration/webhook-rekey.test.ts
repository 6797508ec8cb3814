// Rotating WEBHOOK_SECRET_KEY: with the old key as WEBHOOK_SECRET_KEY_PREVIOUS the service still reads every stored
// secret, `npm run webhooks:rekey` re-encrypts them under the new key (subscribers' secrets unchanged), a second run
// changes nothing, and a wrong previous key changes nothing at all.
import { expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Exit, Layer, Option, Redacted } from "effect"
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { promisify } from "node:util"
import { AppConfig } from "../../layers/Config.js"
import { rekeyWebhookSecrets } from "../../services/webhooks/Rekey.js"
import { WebhookSecrets } from "../../services/webhooks/Secrets.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { testAppConfig } from "../support/config.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"

const run = promisify(execFile)
const OLD = randomBytes(32).toString("hex")
const NEW = randomBytes(32).toString("hex")

/** The secrets service as a process configured with `current` (and `previous`) would have it. */
const secretsWith = (current: string, previous?: string) =>
  WebhookSecrets.Default.pipe(
    Layer.provide(Layer.succeed(AppConfig, testAppConfig({
      webhookSecretKey: Option.some(Redacted.make(current)),
      webhookSecretKeyPrevious: previous === undefined ? Option.none() : Option.some(Redacted.make(previous))
    })))
  )

const storedSecrets = Effect.flatMap(TestEnv, ({ sql }) => sql<{ id: string; secretEncrypted: string }>`SELECT id, secret_encrypted FROM webhook_subscriptions ORDER BY id`)

layer(TestApp({ BACKGROUND_WORKERS: "false", WEBHOOK_SECRET_KEY: OLD }), { excludeTestServices: true })("webhook key rotation", (it) => {
  it.scoped("secrets stored under the old key are read during the rotation and re-encrypted once under the new one", () =>
    Effect.gen(function* () {
      const { baseUrl, databaseUrl, sql } = yield* TestEnv
      const owner = devAccount(2)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url)
      const issued = new Map<string, string>()
      for (const n of [1, 2, 3]) {
        const created = yield* Effect.promise(async () => call(`${baseUrl}/api/v1/webhooks`, {
          method: "POST",
          json: { agentId, url: `https://hooks.example.com/${n}`, events: ["execution.completed"] },
          headers: await walletAuth(owner, agentId)
        }))
        expect(created.status).toBe(201)
        issued.set(created.body.data.id, created.body.data.secret)
      }
      const before = yield* storedSecrets

      // During the rotation (new key, old key as previous) every stored secret is still read.
      const during = yield* Effect.provide(WebhookSecrets, secretsWith(NEW, OLD))
      for (const row of before) expect(during.decrypt(row.secretEncrypted)).toBe(issued.get(row.id))

      // A wrong previous key re-encrypts nothing: the batch rolls back.
      const wrong = yield* Effect.exit(rekeyWebhookSecrets().pipe(Effect.provide(secretsWith(NEW, randomBytes(32).toString("hex"))), Effect.provideService(SqlClient.SqlClient, sql)))
      expect(Exit.isFailure(wrong)).toBe(true)
      expect(yield* storedSecrets).toEqual(before)

      // The command, as an operator runs it.
      const env = { PATH: process.env["PATH"] ?? "", DATABASE_URL: databaseUrl, WEBHOOK_SECRET_KEY: NEW, WEBHOOK_SECRET_KEY_PREVIOUS: OLD }
      const first = yield* Effect.promise(() => run(process.execPath, ["--import", "tsx", "src/tools/webhookRekey.ts"], { env, timeout: 60_000 }))
      expect(first.stdout).toContain("3 checked, 3 re-encrypted")
      expect(first.stdout + first.stderr).not.toContain(NEW)

      // Afterwards the new key alone reads every secret, unchanged for the subscribers; the old key reads none.
      const after = yield* storedSecrets
      const rotated = yield* Effect.provide(WebhookSecrets, secretsWith(NEW))
      const stale = yield* Effect.provide(WebhookSecrets, secretsWith(OLD))
      for (const row of after) {
        expect(rotated.decrypt(row.secretEncrypted)).toBe(issued.get(row.id))
        expect(() => stale.decrypt(row.secretEncrypted)).toThrow()
      }
      const second = yield* Effect.promise(() => run(process.execPath, ["--import", "tsx", "src/tools/webhookRekey.ts"], { env, timeout: 60_000 }))
      expect(second.stdout).toContain("3 checked, 0 re-encrypted")
      expect(yield* storedSecrets).toEqual(after)
    }), { timeout: 120_000 })
})
