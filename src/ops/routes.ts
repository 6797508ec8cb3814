// The operator console at /ops, served before the API (its envelope middleware never sees these paths): login and
// logout, the pages, and the lever posts, with the session cookie, CSRF checks and a nonce-based CSP on every answer.
import { type HttpApp, HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Clock, Effect, Either, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { AppConfig } from "../../layers/Config.js"
import { tokenFingerprint } from "../../services/operator/Actions.js"
import { Decisions } from "../../services/operator/Decisions.js"
import { Levers } from "../../services/operator/Levers.js"
import { pullDisputeLever, RESOLVE_DISPUTE } from "./disputeLever.js"
import { TokenThrottle } from "../../services/operator/TokenThrottle.js"
import { MachineKindSchema } from "../domain/Operator.js"
import { OperatorToken } from "../http/OperatorHttp.js"
import { type Html, layout, opsPath } from "./html.js"
import { type LeverOutcome, pullLever } from "./levers.js"
import { loginPage, messagePage } from "./pages/login.js"
import type { Notice } from "./pages/types.js"
import { view } from "./views.js"
import { makeSessions, SESSION_COOKIE, SESSION_TTL_SECONDS } from "./session.js"

const FLASH_COOKIE = "ops_flash"
const MAX_FORM_BYTES = 16 * 1024
const decodeKind = Schema.decodeUnknownEither(MachineKindSchema)
const Flash = Schema.parseJson(Schema.Struct({ ok: Schema.Boolean, text: Schema.String.pipe(Schema.maxLength(600)) }))

/** The only paths this module answers; everything else goes to the API untouched. */
const isOpsPath = (path: string) => path === "/ops" || path.startsWith("/ops/")

interface Answer {
  readonly status: number
  readonly title: string
  readonly body: Html
}

export const opsConsole = <E, R>(api: HttpApp.HttpApp<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const url = new URL(request.url, "http://ops.invalid")
    if (!isOpsPath(url.pathname)) return yield* api
    return yield* serveOps(request, url)
  })

const serveOps = (request: HttpServerRequest.HttpServerRequest, url: URL) =>
  Effect.gen(function* () {
    const token = yield* OperatorToken
    const config = yield* AppConfig
    const sessions = makeSessions(token)
    const now = yield* Clock.currentTimeMillis
    const secure = config.publicBaseUrl.startsWith("https:")
    const cookieOptions = { httpOnly: true, sameSite: "strict", secure, path: "/ops" } as const
    const nonce = randomBytes(16).toString("base64")
    const session = request.cookies[SESSION_COOKIE]
    const signedIn = sessions.valid(session, now) ? session : undefined
    const decoded = decodeSegments(url.pathname)

    const page = (answer: Answer, csrf?: string) =>
      HttpServerResponse.text(layout({ title: answer.title, nonce, body: answer.body, ...(csrf === undefined ? {} : { csrf }) }), {
        status: answer.status,
        contentType: "text/html; charset=utf-8",
        headers: {
          "content-security-policy": `default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
          "x-frame-options": "DENY",
          // same-origin, not no-referrer: with no-referrer the browser posts forms with `Origin: null`.
          "referrer-policy": "same-origin"
        }
      })
    const see = (location: string) => HttpServerResponse.empty({ status: 303, headers: { location, "cache-control": "no-store" } })
    const message = (status: number, title: string, text: string) => page({ status, title, body: messagePage(text) }, signedIn === undefined ? undefined : sessions.csrf(signedIn))
    // A path that is not valid percent-encoded UTF-8 is the client's mistake, whoever sends it (logged in or not).
    if (decoded === undefined) return message(400, "Bad request", "the path is not valid percent-encoding")
    const segments = decoded
    const route = `${request.method} /${segments.length === 0 ? "" : segments[0]}`

    /** A POST form: same origin (when the browser says), urlencoded, small. */
    const form = Effect.gen(function* () {
      const origin = request.headers["origin"]
      const host = request.headers["host"]
      if (origin !== undefined && origin !== new URL(config.publicBaseUrl).origin && (host === undefined || !/^https?:\/\//.test(origin) || new URL(origin).host !== host)) {
        return Either.left(message(403, "Refused", "cross-origin form posts are refused"))
      }
      if (!/^application\/x-www-form-urlencoded\b/i.test(request.headers["content-type"] ?? "")) {
        return Either.left(message(415, "Refused", "forms are posted as application/x-www-form-urlencoded"))
      }
      const params = yield* request.urlParamsBody.pipe(HttpIncomingMessage.withMaxBodySize(Option.some(MAX_FORM_BYTES)))
      return Either.right((name: string) => params.find(([key]) => key === name)?.[1])
    })

    if (route === "POST /login") {
      const fields = yield* form
      if (Either.isLeft(fields)) return fields.left
      // Failed attempts are limited per client address (the proxy's X-Forwarded-For only with TRUST_PROXY), counted
      // together with the operator API's in PostgreSQL.
      const address = Option.getOrElse(request.remoteAddress, () => "unknown")
      const checked = yield* (yield* TokenThrottle).check("console", address, fields.right("token") ?? "", token)
      if (checked._tag === "Locked") {
        return page({ status: 429, title: "Operator login", body: loginPage({ retryAfterSeconds: checked.retryAfterSeconds }) }).pipe(
          HttpServerResponse.setHeader("retry-after", String(checked.retryAfterSeconds))
        )
      }
      if (checked._tag === "Refused") return page({ status: 401, title: "Operator login", body: loginPage(true) })
      return see("/ops").pipe(HttpServerResponse.unsafeSetCookie(SESSION_COOKIE, sessions.issue(now), { ...cookieOptions, maxAge: `${SESSION_TTL_SECONDS} seconds` }))
    }
    if (signedIn === undefined) {
      if (request.method === "GET" && url.pathname === "/ops") return page({ status: 200, title: "Operator login", body: loginPage(false) })
      return request.method === "GET" ? see("/ops") : message(401, "Log in first", "your session ended; log in again")
    }
    const csrf = sessions.csrf(signedIn)

    if (request.method === "POST") {
      const fields = yield* form
      if (Either.isLeft(fields)) return fields.left
      if (!sessions.csrfValid(signedIn, fields.right("csrf"))) return message(403, "Refused", "the form's CSRF token does not match your session; reload the page")
      if (route === "POST /logout") return see("/ops").pipe(HttpServerResponse.expireCookie(SESSION_COOKIE, cookieOptions))
      if (route === "POST /levers") {
        const outcome: LeverOutcome = fields.right("lever") === RESOLVE_DISPUTE
          ? yield* pullDisputeLever(yield* Decisions, tokenFingerprint(token), {
            target: fields.right("target"),
            operator: fields.right("operator"),
            resolution: fields.right("resolution"),
            clientShareBps: fields.right("clientShareBps"),
            notes: fields.right("reason"),
            confirm: fields.right("confirm")
          })
          : yield* pullLever(yield* Levers, tokenFingerprint(token), {
          lever: fields.right("lever"),
          target: fields.right("target"),
          operator: fields.right("operator"),
          reason: fields.right("reason"),
          confirm: fields.right("confirm")
        })
        const kind = decodeKind(fields.right("kind"))
        const id = fields.right("id") ?? ""
        const back = Either.isRight(kind) && id !== "" ? opsPath(["machines", kind.right, id]) : "/ops/actions"
        const flash: Notice = {
          ok: outcome.outcome === "applied",
          text: `${outcome.lever}: ${outcome.outcome} — ${outcome.message} (${outcome.code})`.slice(0, 600)
        }
        return see(back).pipe(HttpServerResponse.unsafeSetCookie(FLASH_COOKIE, Buffer.from(JSON.stringify(flash)).toString("base64url"), { ...cookieOptions, maxAge: "60 seconds" }))
      }
      return message(404, "Not found", "no such form")
    }
    if (request.method !== "GET") return message(405, "Not allowed", "GET or POST only")

    const flash = segments[0] === "machines" && segments.length === 3 ? readFlash(request.cookies[FLASH_COOKIE]) : undefined
    const shown = yield* view(segments, url, csrf, flash)
    if (shown._tag === "Redirect") return see(shown.location)
    const response = page({ status: shown.status, title: shown.title, body: shown.body }, csrf)
    return shown.flashShown === true ? HttpServerResponse.expireCookie(response, FLASH_COOKIE, cookieOptions) : response
  }).pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.interrupt
        : Effect.logError("ops console failure", cause).pipe(
          Effect.as(HttpServerResponse.text("The console failed to answer; see the server log.", { status: 500, contentType: "text/plain; charset=utf-8" }))
        ))
  )

/** The path's segments after /ops, decoded; undefined when one is not valid percent-encoded UTF-8 (`/ops/%E0`). */
const decodeSegments = (pathname: string): ReadonlyArray<string> | undefined => {
  try {
    return pathname.split("/").slice(2).map((s) => decodeURIComponent(s))
  } catch {
    return undefined
  }
}

const readFlash = (value: string | undefined): Notice | undefined => {
  if (value === undefined) return undefined
  const decoded = Schema.decodeUnknownEither(Flash)(Buffer.from(value, "base64url").toString("utf8"))
  return Either.isRight(decoded) ? decoded.right : undefined
}
