// The chain token (spec section 2): `<base64url payload>.<base64url HMAC-SHA256>` with the spec's abbreviated keys plus the
// call chain (agent ids, for cycle detection). Pure: sign with a key, verify signature, shape and expiry; nothing else.
import { Either, Schema } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"

/** A token is good for 30 seconds (spec); the budget it names is informational, the database holds the real one. */
export const CHAIN_TOKEN_TTL_MS = 30_000
/** The hard ceiling on depth, whatever the root agent allows. */
export const MAX_CHAIN_DEPTH = 5
/** Bounds on what we parse from outside: the whole header and the call chain it carries. */
export const MAX_TOKEN_LENGTH = 4_096
const MAX_CALL_CHAIN = MAX_CHAIN_DEPTH + 1

const Usdc = Schema.String.pipe(Schema.pattern(/^\d{1,12}\.\d{6}$/))
const Id = Schema.String.pipe(Schema.maxLength(64))

export const ChainTokenPayload = Schema.Struct({
  cid: Schema.UUID,
  /**
   * The depth of the call this token pays for (the holder's depth + 1). It may be one past the limit: a token handed to
   * an agent at the deepest level is still a token, and spending it is refused with DEPTH_LIMIT.
   */
  d: Schema.Int.pipe(Schema.between(1, MAX_CHAIN_DEPTH + 1)),
  md: Schema.Int.pipe(Schema.between(1, MAX_CHAIN_DEPTH)),
  rb: Usdc,
  tb: Usdc,
  pa: Schema.NullOr(Id),
  rw: Schema.String.pipe(Schema.pattern(/^0x[0-9a-f]{40}$/)),
  sa: Schema.String.pipe(Schema.maxLength(40)),
  exp: Schema.Int,
  /** The agents on the path from the root to the holder of this token, in order. */
  cc: Schema.Array(Id).pipe(Schema.maxItems(MAX_CALL_CHAIN)),
  /** The execution whose agent holds this token: the parent of the node a call with it creates (the tree's edges). */
  pe: Schema.String.pipe(Schema.pattern(/^(req|job)_[A-Za-z0-9_-]{8,64}$/)),
  tid: Schema.optional(Schema.String.pipe(Schema.pattern(/^[0-9a-f]{32}$/))),
  sid: Schema.optional(Schema.String.pipe(Schema.pattern(/^[0-9a-f]{16}$/)))
})
export type ChainTokenPayload = typeof ChainTokenPayload.Type

export type TokenRejection =
  | { readonly reason: "invalid"; readonly message: string }
  | { readonly reason: "expired"; readonly expiredAt: number }

const decodePayload = Schema.decodeUnknownEither(Schema.parseJson(ChainTokenPayload))

const mac = (key: Uint8Array, payload: string) => createHmac("sha256", key).update(payload).digest()

export const signChainToken = (key: Uint8Array, payload: ChainTokenPayload): string => {
  const body = Buffer.from(JSON.stringify(payload)).toString("base64url")
  return `${body}.${mac(key, body).toString("base64url")}`
}

/** Signature first (nothing from an unsigned token is read), then shape, then expiry at `now`. */
export const verifyChainToken = (key: Uint8Array, token: string, now: number): Either.Either<ChainTokenPayload, TokenRejection> => {
  const invalid = (message: string) => Either.left<TokenRejection>({ reason: "invalid", message })
  if (token.length > MAX_TOKEN_LENGTH) return invalid(`the token is longer than ${MAX_TOKEN_LENGTH} characters`)
  const parts = token.split(".")
  if (parts.length !== 2 || !/^[A-Za-z0-9_-]+$/.test(parts[0] ?? "") || !/^[A-Za-z0-9_-]+$/.test(parts[1] ?? "")) {
    return invalid("the token is not <base64url payload>.<base64url signature>")
  }
  const [body = "", signature = ""] = parts
  // Compared as text: base64url's padding bits would otherwise let a second spelling of the same signature pass.
  const given = Buffer.from(signature)
  const expected = Buffer.from(mac(key, body).toString("base64url"))
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return invalid("the token's signature does not match")
  const payload = decodePayload(Buffer.from(body, "base64url").toString("utf8"))
  if (Either.isLeft(payload)) return invalid("the token's payload is not a chain token")
  if (payload.right.exp <= now) return Either.left({ reason: "expired", expiredAt: payload.right.exp })
  return Either.right(payload.right)
}

/** The agent that would repeat in the call chain, if calling `callee` closes a cycle. */
export const cycleOf = (payload: ChainTokenPayload, callee: string): ReadonlyArray<string> | null =>
  payload.cc.includes(callee) ? [...payload.cc, callee] : null
