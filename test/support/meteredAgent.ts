// A fake agent for metered capabilities: the input says what to answer. A quote request (`"quote": true` in the body)
// answers `{price: input.quote}`; a call waits `input.delayMs`, then answers `{ok: true, echo: input}` with
// `X-Usage-Units: input.units` when the input has `units` (a string, sent as is); the first call with a given
// `input.failFirst` answers 500. A quote request whose input has `holdQuote: true` is held (a slow quote) until
// `releaseQuotes()` answers it.
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface MeteredAgent {
  readonly url: string
  /** Quote requests received. */
  readonly quotes: Array<unknown>
  readonly calls: Array<unknown>
}

/** Quotes held (`holdQuote: true`), answered when released. */
interface Held {
  readonly input: unknown
  readonly answer: () => void
}

export const startMeteredAgent = async () => {
    const quotes: Array<unknown> = []
    const calls: Array<unknown> = []
    const failed = new Set<string>()
    const held: Array<Held> = []
    /** Answers every quote held now. */
    const releaseQuotes = () => {
      for (const h of held.splice(0)) h.answer()
    }
    const server = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { quote?: boolean; input: { quote?: string; units?: string; delayMs?: number; failFirst?: string; holdQuote?: boolean } }
        if (body.quote === true) {
          quotes.push(body.input)
          const answer = () => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ price: body.input.quote ?? "0.02" }))
          if (body.input.holdQuote === true) held.push({ input: body.input, answer })
          else answer()
          return
        }
        calls.push(body.input)
        if (body.input.failFirst !== undefined && !failed.has(body.input.failFirst)) {
          failed.add(body.input.failFirst)
          res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: "planned failure" }))
          return
        }
        setTimeout(() => {
          res.writeHead(200, { "content-type": "application/json", ...(body.input.units === undefined ? {} : { "x-usage-units": body.input.units }) })
            .end(JSON.stringify({ ok: true, echo: body.input }))
        }, body.input.delayMs ?? 0)
      })
    })
    server.keepAliveTimeout = 1_000
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as AddressInfo
    const close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
    return { url: `http://127.0.0.1:${port}/run`, quotes, calls, held: () => held.length, releaseQuotes, close } as const
}

/** The agent for one scope. */
export const meteredAgent = Effect.acquireRelease(Effect.promise(startMeteredAgent), (agent) => Effect.promise(agent.close))
