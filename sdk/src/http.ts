// The one JSON-over-HTTP helper of the SDK: sends a request, unwraps `{success:true, data}`, throws typed errors.
import { errorFromResponse, MarketplaceError } from "./errors.js"

export type Fetch = (input: string, init?: RequestInit) => Promise<Response>

export interface Answer<A> {
  readonly status: number
  readonly headers: Headers
  readonly data: A
}

export interface RequestOptions {
  readonly method?: string
  readonly json?: unknown
  readonly headers?: Record<string, string>
  readonly fetch?: Fetch
}

/** Joins the base URL (with or without a trailing slash) and an absolute path. */
export const joinUrl = (baseUrl: string, path: string) => `${baseUrl.replace(/\/+$/, "")}${path}`

/** Sends one request and returns `data` of a success envelope; any other answer throws a MarketplaceError subclass. */
export const request = async <A>(url: string, options: RequestOptions = {}): Promise<Answer<A>> => {
  const send = options.fetch ?? fetch
  let response: Response
  try {
    response = await send(url, {
      method: options.method ?? (options.json === undefined ? "GET" : "POST"),
      // A plain object (not Headers): x402-fetch drops a Headers object on its paid retry.
      headers: { accept: "application/json", ...(options.json === undefined ? {} : { "content-type": "application/json" }), ...options.headers },
      ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) })
    })
  } catch (cause) {
    throw new MarketplaceError("SDK_NETWORK_ERROR", `could not reach ${url}: ${cause instanceof Error ? cause.message : String(cause)}`, 0, { cause })
  }
  const text = await response.text()
  let body: unknown
  try {
    body = text === "" ? undefined : JSON.parse(text)
  } catch {
    body = undefined
  }
  if (response.ok && typeof body === "object" && body !== null && "success" in body && body.success === true && "data" in body) {
    return { status: response.status, headers: response.headers, data: body.data as A }
  }
  throw errorFromResponse(response.status, body, response.headers.get("retry-after"))
}
