// A plain round-robin HTTP load balancer for tests, as an operator would put in front of several instances: every
// request (not every connection) goes to the next upstream in turn on a new upstream connection, with
// X-Forwarded-For/-Proto/-Host set; bodies stream both ways (event streams included). An upstream taken out of the
// rotation (`down`) gets no requests until it is put back (`up`); a request that cannot reach its upstream is a 502.
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** One request through the balancer: where it went and what came back (0 when the upstream was not reached). */
export interface Routed {
  readonly method: string
  readonly path: string
  readonly upstream: string
  readonly status: number
}

export interface Balancer {
  /** The balancer's own base URL, e.g. the instances' PUBLIC_BASE_URL. */
  readonly url: string
  /** Every request passed on so far, in the order they arrived. */
  readonly routed: Array<Routed>
  /** Sets the upstreams (base URLs) taken in turn; a request with none is a 503. */
  readonly setUpstreams: (urls: ReadonlyArray<string>) => void
  /** Takes an upstream out of the rotation, or puts it back. */
  readonly down: (url: string) => void
  readonly up: (url: string) => void
}

/** Hop-by-hop headers, which a proxy does not pass on. */
const HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"])

const forwardable = (headers: http.IncomingHttpHeaders) =>
  Object.fromEntries(Object.entries(headers).filter(([name, value]) => !HOP.has(name) && value !== undefined))

/** A balancer on 127.0.0.1 (a free port), closed with the scope. */
export const balancer = Effect.acquireRelease(
  Effect.async<Balancer & { readonly server: http.Server }>((resume) => {
    let upstreams: Array<string> = []
    const out = new Set<string>()
    let next = 0
    const routed: Array<Routed> = []
    const pick = () => {
      const live = upstreams.filter((u) => !out.has(u))
      if (live.length === 0) return undefined
      return live[next++ % live.length]
    }

    const server = http.createServer((req, res) => {
      const upstream = pick()
      const entry = { method: req.method ?? "GET", path: req.url ?? "/", upstream: upstream ?? "", status: 0 }
      routed.push(entry)
      if (upstream === undefined) {
        res.writeHead(503, { "content-type": "text/plain" }).end("no upstream")
        return
      }
      const target = new URL(req.url ?? "/", upstream)
      const client = req.socket.remoteAddress ?? "127.0.0.1"
      const prior = req.headers["x-forwarded-for"]
      const headers = {
        ...forwardable(req.headers),
        host: target.host,
        "x-forwarded-for": prior === undefined ? client : `${String(prior)}, ${client}`,
        "x-forwarded-proto": "http",
        "x-forwarded-host": req.headers.host ?? ""
      }
      const proxied = http.request(target, { method: req.method, headers, agent: false }, (answer) => {
        entry.status = answer.statusCode ?? 0
        res.writeHead(answer.statusCode ?? 502, forwardable(answer.headers))
        // Event streams must reach the client as they are written: no buffering on the way.
        res.flushHeaders()
        answer.pipe(res)
        answer.on("error", () => res.destroy())
      })
      proxied.on("error", () => {
        if (res.headersSent) res.destroy()
        else res.writeHead(502, { "content-type": "text/plain" }).end(`upstream ${upstream} unreachable`)
      })
      // A client that goes away takes its upstream request with it, as a proxy does.
      res.on("close", () => {
        if (!res.writableFinished) proxied.destroy()
      })
      req.pipe(proxied)
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(Effect.succeed({
        url: `http://127.0.0.1:${port}`,
        routed,
        server,
        setUpstreams: (urls) => {
          upstreams = [...urls]
        },
        down: (url) => {
          out.add(url)
        },
        up: (url) => {
          out.delete(url)
        }
      }))
    })
  }),
  ({ server }) => Effect.async<void>((resume) => {
    server.closeAllConnections()
    server.close(() => resume(Effect.void))
  })
)
