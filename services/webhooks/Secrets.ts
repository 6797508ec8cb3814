// Webhook signing secrets: made in the Standard Webhooks form (`whsec_` + base64 of 24 random bytes), stored encrypted
// with AES-256-GCM under WEBHOOK_SECRET_KEY (required outside devnet), never logged. During a key rotation a secret
// stored under WEBHOOK_SECRET_KEY_PREVIOUS is still read; `npm run webhooks:rekey` re-encrypts them under the new key.
import { Effect, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { AppConfig } from "../../layers/Config.js"

/** The devnet's key is public like its wallet keys: secrets stored with it are readable from a dump. Refused elsewhere. */
const DEVNET_KEY = createHash("sha256").update("agent-marketplace devnet webhook secrets").digest()

export class WebhookSecrets extends Effect.Service<WebhookSecrets>()("webhooks/WebhookSecrets", {
  effect: Effect.gen(function* () {
    const config = yield* AppConfig
    // Required outside devnet (layers/Config.ts refuses to start without it).
    const key = Option.match(config.webhookSecretKey, { onNone: () => DEVNET_KEY, onSome: (k) => Buffer.from(Redacted.value(k), "hex") })
    const previous = Option.map(config.webhookSecretKeyPrevious, (k) => Buffer.from(Redacted.value(k), "hex"))

    /** A new secret, as shown once to the subscriber. */
    const generate = () => `whsec_${randomBytes(24).toString("base64")}`

    const encrypt = (secret: string) => {
      const iv = randomBytes(12)
      const cipher = createCipheriv("aes-256-gcm", key, iv)
      const body = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()])
      return `v1:${iv.toString("base64")}:${body.toString("base64")}:${cipher.getAuthTag().toString("base64")}`
    }

    const decryptWith = (k: Buffer, stored: string) => {
      const [version, iv, body, tag] = stored.split(":")
      if (version !== "v1" || iv === undefined || body === undefined || tag === undefined) throw new Error("unknown webhook secret format")
      const decipher = createDecipheriv("aes-256-gcm", k, Buffer.from(iv, "base64"))
      decipher.setAuthTag(Buffer.from(tag, "base64"))
      return Buffer.concat([decipher.update(Buffer.from(body, "base64")), decipher.final()]).toString("utf8")
    }

    /** Whether a stored secret was made with the current key (GCM's tag decides: a wrong key never decrypts). */
    const isCurrent = (stored: string) => {
      try {
        decryptWith(key, stored)
        return true
      } catch {
        return false
      }
    }

    /**
     * The stored secret in clear (for signing): under the current key, or during a rotation the previous one; throws
     * when neither made it (a configuration fault).
     */
    const decrypt = (stored: string) => {
      try {
        return decryptWith(key, stored)
      } catch (error) {
        if (Option.isNone(previous)) throw error
        return decryptWith(previous.value, stored)
      }
    }
    return { generate, encrypt, decrypt, isCurrent } as const
  })
}) {}
