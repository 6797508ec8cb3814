// A webhook key rotation's second step: every stored signing secret not yet under WEBHOOK_SECRET_KEY (so under
// WEBHOOK_SECRET_KEY_PREVIOUS) is re-encrypted under it, each row under its lock. Subscribers' secrets do not change.
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { WebhookSecrets } from "./Secrets.js"

export interface RekeyResult {
  readonly checked: number
  readonly reencrypted: number
}

/** Re-encrypts in batches of `batch` rows, one transaction each (deleted subscriptions too: their rows keep a secret). */
export const rekeyWebhookSecrets = (batch = 200) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const secrets = yield* WebhookSecrets
    let after = ""
    let checked = 0
    let reencrypted = 0
    for (;;) {
      const done = yield* sql.withTransaction(
        Effect.gen(function* () {
          const rows = yield* sql<{ id: string; secretEncrypted: string }>`
            SELECT id, secret_encrypted FROM webhook_subscriptions WHERE id > ${after} ORDER BY id LIMIT ${batch} FOR UPDATE`
          for (const row of rows) {
            checked++
            if (secrets.isCurrent(row.secretEncrypted)) continue
            // Throws (and rolls the batch back) when neither key made it: a wrong previous key changes nothing.
            const secret = secrets.decrypt(row.secretEncrypted)
            yield* sql`UPDATE webhook_subscriptions SET secret_encrypted = ${secrets.encrypt(secret)} WHERE id = ${row.id}`
            reencrypted++
          }
          after = rows.at(-1)?.id ?? after
          return rows.length < batch
        })
      )
      if (done) return { checked, reencrypted } satisfies RekeyResult
    }
  }).pipe(Effect.withSpan("webhooks.rekey"))
