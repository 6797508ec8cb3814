// The Ed25519 key that signs requests to agents: PROXY_SIGNING_KEY, or on devnet a key kept in DATA_DIR; its public description.
import { Config, ConfigError, Data, Effect, Option, Redacted } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { ChainMode } from "../Config.js"
import { errorCode } from "./errors.js"

export interface SigningKeyInfo {
  /** First 16 hex characters of sha256 over the SPKI DER public key. */
  readonly keyId: string
  readonly publicKeyPem: string
  readonly algorithm: "Ed25519"
}

export class SigningKeyError extends Data.TaggedError("SigningKeyError")<{ readonly message: string }> {}

/** Agents should refuse signed requests older than this (documented in docs/agent-requests.md). */
export const SIGNATURE_MAX_AGE_MS = 5 * 60_000

/** The bytes an agent verifies: `${timestampMs}.${requestId}.${rawBody}`. */
export const signedPayload = (timestampMs: number | string, requestId: string, rawBody: string): Buffer =>
  Buffer.from(`${timestampMs}.${requestId}.${rawBody}`, "utf8")

const parsePrivateKey = (text: string): crypto.KeyObject => {
  const trimmed = text.trim()
  const key = trimmed.startsWith("-----BEGIN")
    ? crypto.createPrivateKey({ key: trimmed, format: "pem" })
    : crypto.createPrivateKey({ key: Buffer.from(trimmed, "base64"), format: "der", type: "pkcs8" })
  if (key.asymmetricKeyType !== "ed25519") {
    throw new Error(`expected an Ed25519 key, got ${key.asymmetricKeyType ?? "an unknown key type"}`)
  }
  return key
}

const describeSigningKey = (privateKey: crypto.KeyObject): SigningKeyInfo => {
  const publicKey = crypto.createPublicKey(privateKey)
  const der = publicKey.export({ format: "der", type: "spki" })
  const pem = publicKey.export({ format: "pem", type: "spki" })
  return {
    keyId: crypto.createHash("sha256").update(der).digest("hex").slice(0, 16),
    publicKeyPem: typeof pem === "string" ? pem : pem.toString("utf8"),
    algorithm: "Ed25519"
  }
}

/** Devnet: the key lives in DATA_DIR so agents' pinned public keys survive restarts. Two processes racing agree via `link`. */
const loadOrCreateDevKey = (file: string) =>
  Effect.tryPromise({
    try: async () => {
      await fs.mkdir(path.dirname(file), { recursive: true })
      const read = async () => parsePrivateKey(await fs.readFile(file, "utf8"))
      try {
        return await read()
      } catch (error) {
        if (errorCode(error) !== "ENOENT") throw error
      }
      const { privateKey } = crypto.generateKeyPairSync("ed25519")
      const pem = privateKey.export({ format: "pem", type: "pkcs8" })
      // Written whole to a private temporary file first, then linked into place (fails if the key exists): another
      // process never reads a key file that exists but is not written yet (`wx` on the key itself left that window).
      const temporary = `${file}.${process.pid}.${crypto.randomBytes(6).toString("hex")}.tmp`
      await fs.writeFile(temporary, pem, { mode: 0o600, flag: "wx" })
      try {
        await fs.link(temporary, file)
        return privateKey
      } catch (error) {
        if (errorCode(error) === "EEXIST") return await read()
        throw error
      } finally {
        await fs.rm(temporary, { force: true })
      }
    },
    catch: (error) => new SigningKeyError({ message: `could not load or create the devnet proxy signing key ${file}: ${String(error)}` })
  })

export interface RequestSigner {
  readonly info: SigningKeyInfo
  /** Base64 Ed25519 signature over `signedPayload(timestampMs, requestId, rawBody)`. */
  readonly sign: (timestampMs: number, requestId: string, rawBody: string) => string
  /** Base64 Ed25519 signature over any bytes with the same key (the payer's receipts: services/executions/receipt.ts). */
  readonly signBytes: (bytes: Uint8Array) => string
}

/** PROXY_SIGNING_KEY (PEM PKCS#8 or base64 DER), required outside devnet; on devnet a key kept in DATA_DIR. */
export const loadRequestSigner = (options: { readonly chainMode: ChainMode; readonly dataDir: string }) =>
  Effect.gen(function* () {
    const configuredKey = yield* Config.option(Config.redacted("PROXY_SIGNING_KEY"))
    const privateKey = yield* Option.match(configuredKey, {
      onSome: (secret) =>
        Effect.try({
          try: () => parsePrivateKey(Redacted.value(secret)),
          catch: (error) =>
            ConfigError.InvalidData(
              ["PROXY_SIGNING_KEY"],
              `PROXY_SIGNING_KEY must be an Ed25519 private key, PEM (PKCS#8) or base64 of the PKCS#8 DER: ${error instanceof Error ? error.message : String(error)}`
            )
        }),
      onNone: () =>
        options.chainMode === "devnet"
          ? loadOrCreateDevKey(path.join(options.dataDir, "proxy-signing-key.pem"))
          : Effect.fail(
            ConfigError.MissingData(
              ["PROXY_SIGNING_KEY"],
              "PROXY_SIGNING_KEY is required outside devnet (an Ed25519 private key, PEM PKCS#8 or base64 DER); agents verify our requests with it"
            )
          )
    })
    const signer: RequestSigner = {
      info: describeSigningKey(privateKey),
      sign: (timestampMs, requestId, rawBody) =>
        crypto.sign(null, signedPayload(timestampMs, requestId, rawBody), privateKey).toString("base64"),
      signBytes: (bytes) => crypto.sign(null, bytes, privateKey).toString("base64")
    }
    return signer
  })
