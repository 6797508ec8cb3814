// `npm run webhooks:rekey`: the second step of a webhook key rotation (docs/webhooks.md). With DATABASE_URL,
// WEBHOOK_SECRET_KEY (the new key) and WEBHOOK_SECRET_KEY_PREVIOUS (the old one) in the environment, every stored
// signing secret is re-encrypted under the new key; afterwards WEBHOOK_SECRET_KEY_PREVIOUS can be removed.
import { PgClient } from "@effect/sql-pg"
import { Config, Effect, Layer, Option, String as Str } from "effect"
import { AppConfig, ConfigLive } from "../../layers/Config.js"
import { rekeyWebhookSecrets } from "../../services/webhooks/Rekey.js"
import { WebhookSecrets } from "../../services/webhooks/Secrets.js"

const Database = Layer.unwrapEffect(
  Effect.map(Config.redacted("DATABASE_URL"), (url) =>
    PgClient.layer({ url, transformQueryNames: Str.camelToSnake, transformResultNames: Str.snakeToCamel, transformJson: false }))
)

const program = Effect.gen(function* () {
  const config = yield* AppConfig
  if (Option.isNone(config.webhookSecretKey) || Option.isNone(config.webhookSecretKeyPrevious)) {
    return yield* Effect.fail("set WEBHOOK_SECRET_KEY (the new key) and WEBHOOK_SECRET_KEY_PREVIOUS (the old one)")
  }
  const result = yield* rekeyWebhookSecrets()
  yield* Effect.sync(() => console.log(`webhook secrets: ${result.checked} checked, ${result.reencrypted} re-encrypted under WEBHOOK_SECRET_KEY`))
})

Effect.runPromise(program.pipe(Effect.provide(WebhookSecrets.Default), Effect.provide(Database), Effect.provide(ConfigLive), Effect.scoped)).catch(
  (error: unknown) => {
    console.error(`webhooks:rekey: ${error instanceof Error ? error.message : String(error)}`)
    process.exit(1)
  }
)
