// Checks that a request to an agent comes from the marketplace (docs/agent-requests.md): an Ed25519 signature over
// `<x-marketplace-timestamp>.<x-request-id>.<raw body>`, a fresh timestamp, the signing key's id, the body's requestId.
import { createPublicKey, type KeyObject, verify } from "node:crypto"
import { request } from "./http.js"

/** Refuse signatures older (or further in the future) than this. */
export const MAX_SIGNATURE_AGE_MS = 5 * 60 * 1000

export interface MarketplaceKey {
  readonly keyId: string
  readonly key: KeyObject
}

export type IncomingHeaders = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/**
 * The marketplace's public signing key (`GET /api/v1/platform/signing-key`).
 *
 * @example
 * const key = await fetchMarketplaceKey("http://127.0.0.1:3000")
 */
export const fetchMarketplaceKey = async (baseUrl: string): Promise<MarketplaceKey> => {
  const { data } = await request<{ keyId: string; algorithm: string; publicKeyPem: string }>(`${baseUrl.replace(/\/+$/, "")}/api/v1/platform/signing-key`)
  if (data.algorithm !== "Ed25519") throw new Error(`unexpected signing algorithm ${data.algorithm}`)
  return { keyId: data.keyId, key: createPublicKey(data.publicKeyPem) }
}

export type Refusal =
  | "missing signature headers"
  | "signed with another key"
  | "stale timestamp"
  | "unsupported signature scheme"
  | "bad signature"
  | "body is not JSON"
  | "request id in body does not match the signed one"

const single = (headers: IncomingHeaders, name: string) => {
  const value = headers[name] ?? headers[name.toLowerCase()]
  return typeof value === "string" ? value : undefined
}

/**
 * Why a request must be refused, or `undefined` when the marketplace signed exactly these bytes within the last 5
 * minutes. `rawBody` is the body exactly as received, before any parsing; header names in lower case (node's `req.headers`).
 *
 * @example
 * const refusal = checkMarketplaceRequest(req.headers, rawBody, key)
 * if (refusal !== undefined) return res.writeHead(401).end(refusal)
 */
export const checkMarketplaceRequest = (
  headers: IncomingHeaders,
  rawBody: Uint8Array | string,
  trusted: MarketplaceKey,
  now: number = Date.now()
): Refusal | undefined => {
  const timestamp = single(headers, "x-marketplace-timestamp")
  const requestId = single(headers, "x-request-id")
  const keyId = single(headers, "x-marketplace-key-id")
  const signature = single(headers, "x-marketplace-signature")
  if (!timestamp || !requestId || !keyId || !signature) return "missing signature headers"
  if (keyId !== trusted.keyId) return "signed with another key"
  if (!/^\d{1,16}$/.test(timestamp) || Math.abs(now - Number(timestamp)) > MAX_SIGNATURE_AGE_MS) return "stale timestamp"
  if (!signature.startsWith("ed25519=")) return "unsupported signature scheme"
  const encoded = signature.slice("ed25519=".length)
  const signatureBytes = Buffer.from(encoded, "base64")
  // Canonical base64 only: a second spelling of the same bytes (padding bits) is a tampered header too.
  if (signatureBytes.length !== 64 || signatureBytes.toString("base64") !== encoded) return "bad signature"
  const body = typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : Buffer.from(rawBody)
  const signed = Buffer.concat([Buffer.from(`${timestamp}.${requestId}.`, "utf8"), body])
  if (!verify(null, signed, trusted.key, signatureBytes)) return "bad signature"
  let parsed: unknown
  try {
    parsed = JSON.parse(body.toString("utf8"))
  } catch {
    return "body is not JSON"
  }
  // The id the agent acts on must be the signed one.
  if (typeof parsed !== "object" || parsed === null || !("requestId" in parsed) || parsed.requestId !== requestId) {
    return "request id in body does not match the signed one"
  }
  return undefined
}

/**
 * The marketplace's key, fetched once and again when a request names another key id (a rotation), at most once a minute.
 * @example const keyFor = keyCache(baseUrl); const key = await keyFor(req.headers["x-marketplace-key-id"])
 */
export const keyCache = (baseUrl: string, fetchKey: (baseUrl: string) => Promise<MarketplaceKey> = fetchMarketplaceKey) => {
  let current: Promise<MarketplaceKey> | undefined
  let fetchedAt = 0
  const refresh = () => {
    fetchedAt = Date.now()
    current = fetchKey(baseUrl)
    current.catch(() => (current = undefined))
    return current
  }
  return async (keyId: string | undefined): Promise<MarketplaceKey> => {
    const known = await (current ?? refresh())
    if (keyId === undefined || keyId === known.keyId || Date.now() - fetchedAt < 60_000) return known
    return await refresh()
  }
}
