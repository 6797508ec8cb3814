// The login form and plain messages; the status notice shown after a lever.
import { type Html, html } from "../html.js"
import type { Notice } from "./types.js"

export const notice = (n: Notice | undefined): Html | string =>
  n === undefined ? "" : html`<div class="notice ${n.ok ? "ok" : "bad"}" role="status">${n.text}</div>`

/** The login form; after a refused token, or while this address has too many failed logins (nothing is checked then). */
export const loginPage = (refused: boolean | { readonly retryAfterSeconds: number }): Html =>
  html`${refused === false ? "" : refused === true
    ? notice({ ok: false, text: "That token was refused." })
    : notice({ ok: false, text: `Too many failed logins from your address. Try again in ${Math.ceil(refused.retryAfterSeconds / 60)} minute${refused.retryAfterSeconds > 60 ? "s" : ""} (${refused.retryAfterSeconds} seconds); until then every wrong token is refused like this one (the right token still logs you in).` })}
<form method="post" action="/ops/login" class="lever">
<label>Operator token <input type="password" name="token" required autocomplete="current-password" autofocus></label>
<button type="submit">Log in</button></form>
<p class="muted">The token is OPERATOR_TOKEN (printed in the devnet banner; devnet keeps it in DATA_DIR/operator-token). It is checked once; the browser then keeps a signed session cookie, never the token.</p>`

export const messagePage = (text: string): Html => html`<p>${text}</p><p><a href="/ops">Back to what needs attention</a></p>`
