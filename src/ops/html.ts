// HTML for the operator console: a tagged template that escapes every interpolated value unless it is already Html,
// and the page layout (a style sheet allowed by the response's CSP nonce; no scripts).

/** Markup that is safe to emit as is: built only by the `html` template (or `Html.trusted` for constants). */
export class Html {
  private constructor(readonly markup: string) {}
  /** Markup written in this code base (never data from outside). */
  static trusted(markup: string): Html {
    return new Html(markup)
  }
  toString(): string {
    return this.markup
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;", "`": "&#96;" }

/** Escapes text for an element's content or a quoted attribute value. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"'`]/g, (c) => ESCAPES[c] ?? c)

export type Interpolated = Html | string | number | bigint | boolean | null | undefined | ReadonlyArray<Interpolated>

const render = (value: Interpolated): string => {
  if (value instanceof Html) return value.markup
  if (value === null || value === undefined || value === false) return ""
  if (Array.isArray(value)) return value.map(render).join("")
  return escapeHtml(String(value))
}

/** `html\`<td>${actorId}</td>\``: strings, numbers and arrays of them are escaped; Html values are kept. */
export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Interpolated>): Html =>
  Html.trusted(strings.reduce((out, part, i) => out + part + (i < values.length ? render(values[i] as Interpolated) : ""), ""))

/** A path under /ops with each segment and query value encoded. */
export const opsPath = (segments: ReadonlyArray<string>, query: Record<string, string | undefined> = {}): string => {
  const path = ["/ops", ...segments.map(encodeURIComponent)].join("/")
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, value)
  const search = params.toString()
  return search === "" ? path : `${path}?${search}`
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.5rem;align-items:center}
header a{color:#fff}
main{padding:1rem 1.2rem;max-width:1600px}
table{border-collapse:collapse;background:#fff;margin:.5rem 0 1rem}
th,td{border:1px solid #d8dce3;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#eef0f4}
pre{background:#fff;border:1px solid #d8dce3;padding:.5rem;overflow:auto;max-height:28rem}
.kinds{display:flex;flex-wrap:wrap;gap:1rem}.kinds section{background:#fff;border:1px solid #d8dce3;padding:.5rem .8rem}
.notice{padding:.5rem .8rem;border:1px solid;margin:.5rem 0}.ok{background:#e8f6ec;border-color:#5aa469}.bad{background:#fbeaea;border-color:#c0504d}
.lever{background:#fff;border:1px solid #d8dce3;padding:.6rem .8rem;margin:.5rem 0;max-width:42rem}
.lever label{display:block;margin:.25rem 0}.lever input[type=text]{width:24rem}
.op{color:#7a3e00;font-weight:600}.muted{color:#69707d}
svg text{font:11px system-ui,sans-serif}
tr.problem td{background:#fbeaea}.tag{font-size:11px;color:#a02020;border:1px solid #c0504d;border-radius:3px;padding:0 .25rem}
td.num{text-align:right;white-space:nowrap}td.cause{max-width:34rem}time{white-space:nowrap}
header .search{margin-left:auto}header .search input{width:22rem}header form.logout{margin-left:0}
main .search input{width:32rem}figure.diagram{margin:.5rem 0;overflow:auto;background:#fff;border:1px solid #d8dce3;padding:.5rem}
a.id{font-family:ui-monospace,monospace;font-size:12px}
`

export interface PageOptions {
  readonly title: string
  readonly nonce: string
  /** The logout form's CSRF token when signed in; none on the login page. */
  readonly csrf?: string
  readonly body: Html
}

export const layout = (page: PageOptions): string =>
  html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${page.title} · marketplace ops</title><style nonce="${page.nonce}">${Html.trusted(STYLE)}</style></head>
<body><header><strong>marketplace ops</strong>${
    page.csrf === undefined
      ? ""
      : html`<a href="/ops">Needs attention</a><a href="/ops/overview">Overview</a><a href="/ops/actions">Operator actions</a>
<form method="get" action="/ops/search" class="search" role="search"><input type="search" name="q" maxlength="128" placeholder="Find any id, address or tx hash" aria-label="Search by id"></form>
<form method="post" action="/ops/logout" class="logout"><input type="hidden" name="csrf" value="${page.csrf}"><button type="submit">Log out</button></form>`
  }</header>
<main><h1>${page.title}</h1>${page.body}</main></body></html>`.markup
