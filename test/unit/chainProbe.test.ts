// What /health counts as a chain that answers badly (degraded) versus one that does not answer (503).
import { describe, expect, it } from "@effect/vitest"
import { HttpRequestError, RpcRequestError, TimeoutError } from "viem"
import { answeredBadly } from "../../layers/chainProbe.js"

const url = "http://rpc.example"

describe("chain probe classification", () => {
  it("a 429 or a 5xx from the provider is an answer, only a bad one", () => {
    expect(answeredBadly(new HttpRequestError({ url, status: 429, body: {}, details: "Too Many Requests" }))).toBe(true)
    expect(answeredBadly(new HttpRequestError({ url, status: 503, body: {}, details: "Service Unavailable" }))).toBe(true)
  })

  it("a JSON-RPC error is an answer", () => {
    expect(answeredBadly(new RpcRequestError({ url, body: {}, error: { code: -32603, message: "internal error" } }))).toBe(true)
  })

  it("a timeout, a refused connection or a non-viem error is no answer", () => {
    expect(answeredBadly(new TimeoutError({ url, body: {} }))).toBe(false)
    expect(answeredBadly(new HttpRequestError({ url, body: {}, details: "fetch failed" }))).toBe(false)
    expect(answeredBadly(new Error("boom"))).toBe(false)
    expect(answeredBadly("timeout")).toBe(false)
  })
})
