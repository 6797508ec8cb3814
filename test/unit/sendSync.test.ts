import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createPublicClient } from "viem"
import { poolTransport } from "../../layers/poolTransport.js"
import { methodMissing } from "../../services/treasury/sendSync.js"

/** A node answering eth_sendRawTransactionSync with the error the test sets. */
let answer: { code: number; message: string } = { code: -32601, message: "Method not found" }
const server = createServer((req, res) => {
  let body = ""
  req.on("data", (c: Buffer) => (body += c.toString("utf8")))
  req.on("end", () => {
    const call = JSON.parse(body) as { id: number }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: call.id, error: answer }))
  })
})
let url = ""
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

const failureOf = async (error: { code: number; message: string }) => {
  answer = error
  const client = createPublicClient({ transport: poolTransport(url, { timeoutMs: 2_000, retryCount: 0, retryDelayMs: 10, maxRetryAfterSeconds: 1 }) })
  return client.sendRawTransactionSync({ serializedTransaction: "0x02" }).then(() => undefined, (e: unknown) => e)
}

describe("methodMissing (eth_sendRawTransactionSync's fallback)", () => {
  it("is true for a node's method-not-found, through viem's errors and our transport", async () => {
    expect(methodMissing(await failureOf({ code: -32601, message: "Method not found" }))).toBe(true)
    expect(methodMissing(await failureOf({ code: -32600, message: "Unsupported method: eth_sendRawTransactionSync" }))).toBe(true)
    expect(methodMissing(await failureOf({ code: -32000, message: "the method eth_sendRawTransactionSync does not exist/is not available" }))).toBe(true)
  })

  it("is false for a send the node refused or a timeout (those fall back once, and the next send tries again)", async () => {
    expect(methodMissing(await failureOf({ code: -32003, message: "nonce too low" }))).toBe(false)
    expect(methodMissing(await failureOf({ code: 4, message: "The transaction was added to the mempool but wasn't processed within the timeout" }))).toBe(false)
    expect(methodMissing(new Error("fetch failed"))).toBe(false)
  })
})
