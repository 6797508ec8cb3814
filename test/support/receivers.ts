// Webhook and callback receivers for tests: loopback HTTP servers that record every post (headers, raw body) and answer
// with scripted statuses, or hold a request open until the test lets it go.
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface Received {
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  /** The statuses still to answer, in turn; the last one repeats. Change it to change the receiver's mind. */
  readonly answer: Array<number>
  /**
   * While set, a post is recorded and then held open (never answered) and `onHeld` is called with it: a receiver that
   * is slow exactly when the test wants (e.g. to kill the sender mid-delivery).
   */
  hold: ((received: Received) => void) | undefined
}

/**
 * A receiver on 127.0.0.1 answering `statuses` in turn (the last one from then on), or the status `statuses` picks for
 * each post; closed with the scope.
 */
export const receiver = (statuses: ReadonlyArray<number> | ((received: Received) => number) = [200]) =>
  Effect.acquireRelease(
    Effect.async<Receiver & { readonly server: http.Server }>((resume) => {
      const pick = typeof statuses === "function" ? statuses : undefined
      const state: Receiver & { server: http.Server | undefined } = { url: "", received: [], answer: typeof statuses === "function" ? [] : [...statuses], hold: undefined, server: undefined }
      const server = http.createServer((req, res) => {
        let body = ""
        req.on("data", (c: Buffer) => (body += c.toString("utf8")))
        req.on("end", () => {
          const got = { headers: req.headers, body }
          state.received.push(got)
          if (state.hold !== undefined) return state.hold(got)
          const status = pick?.(got) ?? (state.answer.length > 1 ? state.answer.shift() : state.answer[0]) ?? 200
          res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "ok" : "receiver down")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed(Object.assign(state, { url: `http://127.0.0.1:${port}/hook`, server })))
      })
    }),
    ({ server }) => Effect.sync(() => server.closeAllConnections()).pipe(Effect.zipRight(Effect.sync(() => server.close())))
  )

/** Polls `check` in real time (work that runs outside the test's clock, such as an async execution) for up to `ms`. */
export const untilReal = <A, E, R>(effect: Effect.Effect<A, E, R>, check: (a: A) => boolean, ms = 15_000): Effect.Effect<A, E, R> =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    for (;;) {
      const value = yield* effect
      if (check(value)) return value
      if (Date.now() > deadline) return yield* Effect.dieMessage(`not within ${ms} ms`)
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
    }
  })
