// Console sessions: the login checks OPERATOR_TOKEN in constant time; the cookie then holds a signed session (issue time,
// random id, HMAC under a key derived from the token), never the token; the CSRF token is an HMAC of the session.
import { Redacted } from "effect"
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

export const SESSION_COOKIE = "ops_session"
/** A session lasts at most this long after login. */
export const SESSION_TTL_SECONDS = 12 * 60 * 60

/** The console's check is the operator API's (services/operator/TokenThrottle.ts). */
export { tokenMatches } from "../../services/operator/TokenThrottle.js"

const equalText = (a: string, b: string) => {
  const x = Buffer.from(a, "utf8")
  const y = Buffer.from(b, "utf8")
  return x.length === y.length && timingSafeEqual(x, y)
}

export interface Sessions {
  /** A new session cookie value, issued at `nowMs`. */
  readonly issue: (nowMs: number) => string
  /** Whether a cookie value is a session this token signed that has not expired. */
  readonly valid: (value: string | undefined, nowMs: number) => value is string
  /** The CSRF token of a session (the same for the session's life). */
  readonly csrf: (session: string) => string
  readonly csrfValid: (session: string, offered: string | undefined) => boolean
}

/**
 * The key is derived from the token, so rotating OPERATOR_TOKEN ends every session, and a leaked cookie reveals nothing of
 * the token. Sessions are stateless: logout expires the cookie in the browser; a copied value stays valid until its TTL.
 */
export const makeSessions = (token: Redacted.Redacted<string>): Sessions => {
  const key = createHmac("sha256", Redacted.value(token)).update("marketplace ops console session v1").digest()
  const mac = (data: string) => createHmac("sha256", key).update(data).digest("base64url")
  const csrf = (session: string) => mac(`csrf|${session}`)
  return {
    issue: (nowMs) => {
      const body = `${Math.floor(nowMs / 1000)}.${randomBytes(16).toString("base64url")}`
      return `${body}.${mac(`session|${body}`)}`
    },
    valid: (value, nowMs): value is string => {
      const match = value === undefined ? null : /^(\d{1,12})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(value)
      if (match === null) return false
      const [, issued, id, signature] = match
      if (!equalText(mac(`session|${issued}.${id}`), signature ?? "")) return false
      const age = nowMs / 1000 - Number(issued)
      return age >= -60 && age <= SESSION_TTL_SECONDS
    },
    csrf,
    csrfValid: (session, offered) => offered !== undefined && equalText(csrf(session), offered)
  }
}
