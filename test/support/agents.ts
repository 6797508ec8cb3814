// Fake agents for tests: loopback HTTP servers that answer like real agents (or misbehave on purpose) and record every request.
import { Effect } from "effect"
import * as http from "node:http"

export type Behaviour =
  /** 200 `{echo: input, requestId}`. */
  | "echo"
  /** Reads the request, then destroys the socket without answering. */
  | "close-socket"
  /** Sends headers announcing a body, half of it, then destroys the socket. */
  | "close-mid-body"
  /** 200 with a body that is not JSON. */
  | "invalid-json"
  | { readonly kind: "json"; readonly status: number; readonly body: unknown }
  | { readonly kind: "delay"; readonly ms: number; readonly then: Behaviour }
  /** Streams a JSON object of `bytes` bytes (chunked unless `declareLength`), honouring back-pressure. */
  | { readonly kind: "oversize"; readonly bytes: number; readonly declareLength?: boolean }
  | { readonly kind: "redirect"; readonly location: string; readonly status?: number }
  /** Headers and half a JSON body at once, the rest after `ms` (a slow body, for timeouts that must cover it). */
  | { readonly kind: "stall-body"; readonly ms: number }
  /** 500 for the first `n` calls made while this behaviour is set, then `then`. */
  | { readonly kind: "fail-times"; readonly n: number; readonly then: Behaviour }
  /**
   * An agent inside a chain: hires other agents through the marketplace at `baseUrl` with the X-Chain-Token it was sent
   * (each of `calls` in order, or all at once when `concurrent`), then answers 200
   * `{echo: input, requestId, calls: [{status, body}]}` (`status` 0 when the request itself failed).
   */
  | { readonly kind: "call-back"; readonly baseUrl: string; readonly calls: ReadonlyArray<ChainedCall>; readonly concurrent?: boolean }

export interface ChainedCall {
  /** The POST /api/v1/execute body. */
  readonly body: unknown
  /** The X-Chain-Token to send, from the one received (default: as received). */
  readonly token?: (received: string) => string
  /** Extra request headers (e.g. `connection: close`, so that sub-calls spread over a cluster's workers). */
  readonly headers?: Record<string, string>
}

/** What a call-back agent got back from the marketplace for one of its sub-calls. */
export interface ChainedResult {
  readonly status: number
  readonly body: unknown
  /** The X-PAYMENT-USED response header: a sub-call's read-back handle. */
  readonly paymentUsed?: string | null
}

/** The marketplace's answer to one sub-call with its response headers (lower-case names), kept beside the output. */
export interface ChainedAnswer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
}

const callMarketplace = async (baseUrl: string, token: string, body: unknown, answers: Array<ChainedAnswer>, headers: Record<string, string> = {}): Promise<ChainedResult> => {
  try {
    const response = await fetch(`${baseUrl}/api/v1/execute`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", "x-chain-token": token },
      body: JSON.stringify(body)
    })
    answers.push({ status: response.status, headers: Object.fromEntries(response.headers) })
    const text = await response.text()
    const paymentUsed = response.headers.get("x-payment-used")
    try {
      return { status: response.status, body: JSON.parse(text), paymentUsed }
    } catch {
      return { status: response.status, body: text, paymentUsed }
    }
  } catch (error) {
    return { status: 0, body: String(error) }
  }
}

export interface ReceivedCall {
  readonly method: string
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly rawBody: string
  /** The parsed JSON body, or undefined when it was not JSON. */
  readonly body: unknown
  /** "aborted": the client went away before we answered; "closed": the agent dropped the socket on purpose. */
  outcome: "pending" | "answered" | "aborted" | "closed"
  /** Response body bytes handed to the socket so far. */
  bytesSent: number
}

export interface FakeAgent {
  readonly url: string
  readonly healthUrl: string
  readonly port: number
  /** Execution requests, in arrival order (health checks are not recorded here). */
  readonly calls: Array<ReceivedCall>
  /** The marketplace's answers to this agent's sub-calls (call-back behaviour), in the order they came. */
  readonly chainedAnswers: Array<ChainedAnswer>
  readonly healthChecks: () => number
  setBehaviour(b: Behaviour): void
  /** Status of GET /health (200 by default), optionally answered after `delayMs`. */
  setHealth(status: number, delayMs?: number): void
  /** Resolves when call number `index` (0-based) has arrived. */
  waitForCall(index?: number, timeoutMs?: number): Promise<ReceivedCall>
  close(): Promise<void>
}

const CHUNK = Buffer.alloc(64 * 1024, "x")

export const startFakeAgent = async (initial: Behaviour = "echo"): Promise<FakeAgent> => {
  let behaviour = initial
  let health = { status: 200, delayMs: 0 }
  let healthChecks = 0
  const calls: Array<ReceivedCall> = []
  const chainedAnswers: Array<ChainedAnswer> = []
  const timers = new Set<NodeJS.Timeout>()
  const waiters = new Set<() => void>()
  // fail-times counts per behaviour object, so setting a new one starts a new count.
  const failures = new WeakMap<object, number>()

  const later = (ms: number, res: http.ServerResponse, then: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer)
      then()
    }, ms)
    timers.add(timer)
    res.once("close", () => {
      clearTimeout(timer)
      timers.delete(timer)
    })
  }

  const json = (res: http.ServerResponse, call: ReceivedCall | undefined, status: number, body: unknown) => {
    const text = JSON.stringify(body)
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
    res.end(text)
    if (call !== undefined) call.bytesSent = Buffer.byteLength(text)
  }

  const streamOversize = (res: http.ServerResponse, call: ReceivedCall, bytes: number, declareLength: boolean) => {
    const head = Buffer.from('{"data":"')
    const tail = Buffer.from('"}')
    res.writeHead(200, { "content-type": "application/json", ...(declareLength ? { "content-length": String(bytes) } : {}) })
    res.write(head)
    call.bytesSent = head.length
    const fill = bytes - tail.length
    const pump = () => {
      while (call.bytesSent < fill) {
        if (res.destroyed) return
        const n = Math.min(CHUNK.length, fill - call.bytesSent)
        const ok = res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))
        call.bytesSent += n
        if (!ok) {
          res.once("drain", pump)
          return
        }
      }
      res.end(tail)
      call.bytesSent += tail.length
    }
    pump()
  }

  const run = (b: Behaviour, req: http.IncomingMessage, res: http.ServerResponse, call: ReceivedCall) => {
    if (b === "echo") {
      const body = call.body
      const input = typeof body === "object" && body !== null && "input" in body ? body.input : undefined
      const requestId = typeof body === "object" && body !== null && "requestId" in body ? body.requestId : undefined
      return json(res, call, 200, { echo: input, requestId })
    }
    if (b === "close-socket") {
      call.outcome = "closed"
      return req.socket.destroy()
    }
    if (b === "close-mid-body") {
      const text = JSON.stringify({ result: "this body is cut in the middle ".repeat(10) })
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
      res.write(text.slice(0, Math.floor(text.length / 2)))
      call.outcome = "closed"
      // Let the half body reach the client first, so it sees headers and data and then a dead socket.
      return later(20, res, () => req.socket.destroy())
    }
    if (b === "invalid-json") {
      res.writeHead(200, { "content-type": "application/json" })
      return res.end("{this is not json")
    }
    switch (b.kind) {
      case "json":
        return json(res, call, b.status, b.body)
      case "delay":
        return later(b.ms, res, () => run(b.then, req, res, call))
      case "oversize":
        return streamOversize(res, call, b.bytes, b.declareLength === true)
      case "stall-body": {
        const text = JSON.stringify({ result: "this body arrives slowly ".repeat(10) })
        const half = Math.floor(text.length / 2)
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
        res.write(text.slice(0, half))
        return later(b.ms, res, () => res.end(text.slice(half)))
      }
      case "redirect":
        res.writeHead(b.status ?? 302, { location: b.location, "content-length": "0" })
        return res.end()
      case "call-back": {
        const received = req.headers["x-chain-token"]
        const token = typeof received === "string" ? received : ""
        const send = (c: ChainedCall) => callMarketplace(b.baseUrl, c.token === undefined ? token : c.token(token), c.body, chainedAnswers, c.headers)
        const results = b.concurrent === true
          ? Promise.all(b.calls.map(send))
          : b.calls.reduce<Promise<Array<ChainedResult>>>(async (done, c) => [...(await done), await send(c)], Promise.resolve([]))
        const body = call.body
        const input = typeof body === "object" && body !== null && "input" in body ? body.input : undefined
        const requestId = typeof body === "object" && body !== null && "requestId" in body ? body.requestId : undefined
        void results.then((calls) => {
          if (!res.destroyed) json(res, call, 200, { echo: input, requestId, calls })
        })
        return
      }
      case "fail-times": {
        const seen = failures.get(b) ?? 0
        if (seen < b.n) {
          failures.set(b, seen + 1)
          return json(res, call, 500, { error: `planned failure ${seen + 1} of ${b.n}` })
        }
        return run(b.then, req, res, call)
      }
    }
  }

  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const path = req.url ?? "/"
      if (req.method === "GET" && path === "/health") {
        healthChecks++
        const { status, delayMs } = health
        const answer = () => json(res, undefined, status, { status: status < 300 ? "ok" : "unhealthy" })
        return delayMs > 0 ? later(delayMs, res, answer) : answer()
      }
      const rawBody = Buffer.concat(chunks).toString("utf8")
      let body: unknown
      try {
        body = JSON.parse(rawBody)
      } catch {
        body = undefined
      }
      const call: ReceivedCall = { method: req.method ?? "", path, headers: req.headers, rawBody, body, outcome: "pending", bytesSent: 0 }
      calls.push(call)
      for (const wake of waiters) wake()
      res.once("finish", () => {
        if (call.outcome === "pending") call.outcome = "answered"
      })
      res.once("close", () => {
        if (call.outcome === "pending") call.outcome = "aborted"
      })
      run(behaviour, req, res, call)
    })
  })

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("fake agent did not get a TCP port")
  const port = address.port

  let closed: Promise<void> | undefined
  return {
    url: `http://127.0.0.1:${port}/execute`,
    healthUrl: `http://127.0.0.1:${port}/health`,
    port,
    calls,
    chainedAnswers,
    healthChecks: () => healthChecks,
    setBehaviour: (b) => {
      behaviour = b
    },
    setHealth: (status, delayMs = 0) => {
      health = { status, delayMs }
    },
    waitForCall: (index = 0, timeoutMs = 5_000) =>
      new Promise<ReceivedCall>((resolve, reject) => {
        const check = () => {
          const call = calls[index]
          if (call === undefined) return false
          waiters.delete(check)
          clearTimeout(timer)
          resolve(call)
          return true
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`fake agent: call ${index} did not arrive within ${timeoutMs} ms`))
        }, timeoutMs)
        waiters.add(check)
        check()
      }),
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer)
        timers.clear()
        server.close(() => resolve())
        server.closeAllConnections()
      })
      return closed
    }
  }
}

/** A fake agent as a scoped resource: stopped when the scope closes. */
export const fakeAgent = (behaviour: Behaviour = "echo") =>
  Effect.acquireRelease(
    Effect.promise(() => startFakeAgent(behaviour)),
    (agent) => Effect.promise(() => agent.close())
  )
