import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BatchRefused, makeRpcBatch, RpcBatchError } from "../../layers/rpcBatch.js"

/** A fake JSON-RPC endpoint: `next` answers each request (the list of calls it got). */
type Handler = (calls: Array<{ id: number; method: string }>, res: ServerResponse, req: IncomingMessage) => void
let next: Array<Handler> = []
let seen = 0
let url = ""
const server = createServer((req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    seen++
    const handler = next.shift() ?? echo
    handler(JSON.parse(Buffer.concat(chunks).toString("utf8")), res, req)
  })
})
/** Answers every call with its method name, in reverse order (ids decide, not positions). */
const echo: Handler = (calls, res) =>
  void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(calls.map((c) => ({ jsonrpc: "2.0", id: c.id, result: c.method })).reverse()))

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/rpc?key=1`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

const rpcBounds = { timeoutMs: 300, retries: 2, retryDelayMs: 10, maxRetryAfterSeconds: 1 }
const calls = [{ method: "a", params: [] }, { method: "b", params: [1] }]

describe("makeRpcBatch (the hot reads as one JSON-RPC batch)", () => {
  it("sends the calls as one request and returns their results in the calls' order", async () => {
    const client = makeRpcBatch(url, rpcBounds)
    seen = 0
    expect(await client.batch(calls)).toEqual(["a", "b"])
    expect(seen).toBe(1)
    await client.close()
  })

  it("retries 429 and 5xx answers on an RPC (twice at most), honouring a short Retry-After", async () => {
    const client = makeRpcBatch(url, rpcBounds)
    seen = 0
    next = [(_, res) => void res.writeHead(429, { "retry-after": "0" }).end("slow down"), (_, res) => void res.writeHead(503).end("busy")]
    expect(await client.batch(calls)).toEqual(["a", "b"])
    expect(seen).toBe(3)
    seen = 0
    next = [0, 1, 2].map(() => (_, res) => void res.writeHead(502).end("bad gateway"))
    await expect(client.batch(calls)).rejects.toThrow(RpcBatchError)
    expect(seen).toBe(3)
    await client.close()
  })

  it("does not retry on a devnet, nor a call's own JSON-RPC error (a revert)", async () => {
    const devnet = makeRpcBatch(url, { ...rpcBounds, retries: 0 })
    seen = 0
    next = [(_, res) => void res.writeHead(500).end("oops")]
    await expect(devnet.batch(calls)).rejects.toThrow(/HTTP 500/)
    expect(seen).toBe(1)
    const rpc = makeRpcBatch(url, rpcBounds)
    seen = 0
    next = [(cs, res) => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(cs.map((c) => ({ jsonrpc: "2.0", id: c.id, error: { code: 3, message: "execution reverted" } }))))]
    await expect(rpc.batch(calls)).rejects.toThrow(/execution reverted/)
    expect(seen).toBe(1)
    await devnet.close()
    await rpc.close()
  })

  it("bounds each try in time: a hanging RPC fails after (retries + 1) timeouts", async () => {
    const client = makeRpcBatch(url, { ...rpcBounds, timeoutMs: 150, retries: 1 })
    const held: Array<ServerResponse> = []
    next = [(_, res) => void held.push(res), (_, res) => void held.push(res)]
    const started = Date.now()
    await expect(client.batch(calls)).rejects.toThrow(/did not answer within 150 ms/)
    const ms = Date.now() - started
    expect(ms).toBeGreaterThanOrEqual(250)
    expect(ms).toBeLessThan(5_000)
    for (const res of held) res.destroy()
    await client.close()
  })

  it("refuses an answer larger than its bound, and says BatchRefused when the provider takes no batches", async () => {
    const client = makeRpcBatch(url, { ...rpcBounds, maxResponseBytes: 1_000 })
    next = [(_, res) => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify([{ id: 1, result: "x".repeat(5_000) }]))]
    await expect(client.batch(calls)).rejects.toThrow(/larger than 1000 bytes/)
    next = [(_, res) => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "batches are not allowed" } }))]
    await expect(client.batch(calls)).rejects.toThrow(BatchRefused)
    await client.close()
  })

  it("sends the URL's credentials as basic authentication, not in the URL", async () => {
    const u = new URL(url)
    u.username = "user"
    u.password = "p@ss"
    const client = makeRpcBatch(u.toString(), rpcBounds)
    let auth: string | undefined
    next = [(cs, res, req) => {
      auth = req.headers.authorization
      echo(cs, res, req)
    }]
    await client.batch(calls)
    expect(auth).toBe(`Basic ${btoa("user:p@ss")}`)
    await client.close()
  })
})
