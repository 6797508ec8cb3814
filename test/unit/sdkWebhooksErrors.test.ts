// The SDK's webhook check against the service's own delivery headers (services/webhooks/signing.ts), its wallet
// signatures against the service's verifier (services/agents/WalletAuth.ts), and the mapping of error envelopes to classes.
import {
  AuthenticationError,
  ConflictError,
  errorFromResponse,
  ExecutionError,
  MarketplaceError,
  NotFoundError,
  PaymentError,
  RateLimitError,
  UnavailableError,
  ValidationError,
  walletAuthHeaders,
  WebhookVerificationError,
  webhooks
} from "@agent-marketplace/sdk"
import { Effect, Exit } from "effect"
import { randomBytes } from "node:crypto"
import { privateKeyToAccount } from "viem/accounts"
import { describe, expect, it } from "vitest"
import { verifyWalletSignature } from "../../services/agents/WalletAuth.js"
import { deliveryHeaders } from "../../services/webhooks/signing.js"

const secret = `whsec_${randomBytes(24).toString("base64")}`
const AT = 1_790_000_000_000
const body = JSON.stringify({ event: "withdrawal.completed", timestamp: new Date(AT).toISOString(), data: { withdrawalId: "wd_1", txHash: "0xabc" } })
const headers = deliveryHeaders({ secret, subscriptionId: "wh_1", deliveryId: "dlv_1", eventType: "withdrawal.completed", attempt: 1, body, at: AT })

describe("SDK: webhooks.verify", () => {
  it("a delivery the service signed verifies and parses, from node headers or a Headers object", () => {
    expect(webhooks.verify(body, headers, secret, AT + 1_000).data).toEqual({ withdrawalId: "wd_1", txHash: "0xabc" })
    expect(webhooks.verify(Buffer.from(body), new Headers(headers), secret, AT).event).toBe("withdrawal.completed")
  })

  it("a changed body, either signature wrong or missing, another secret or an old timestamp is refused", () => {
    const refused = (raw: string, h: Record<string, string>, s = secret, now = AT) => {
      expect(() => webhooks.verify(raw, h, s, now)).toThrow(WebhookVerificationError)
    }
    refused(body.replace("0xabc", "0xabd"), headers)
    refused(body, { ...headers, "x-webhook-signature": headers["x-webhook-signature"]!.replace(/.$/, (c) => (c === "0" ? "1" : "0")) })
    refused(body, { ...headers, "webhook-signature": "v1,AAAA" })
    refused(body, Object.fromEntries(Object.entries(headers).filter(([k]) => k !== "webhook-signature")))
    refused(body, Object.fromEntries(Object.entries(headers).filter(([k]) => k !== "x-webhook-signature")))
    refused(body, { ...headers, "webhook-id": "dlv_2" })
    refused(body, headers, `whsec_${randomBytes(24).toString("base64")}`)
    refused(body, headers, secret, AT + 5 * 60_000 + 1_000)
  })
})

describe("SDK: wallet signatures", () => {
  it("walletAuthHeaders produce what the service's verifier accepts, a fresh timestamp each time", async () => {
    const account = privateKeyToAccount(`0x${randomBytes(32).toString("hex")}`)
    const agentId = "0b6a3e0c-5d2c-4c55-a0f3-8a4c6f0a1b2c"
    const first = await walletAuthHeaders(account, agentId)
    const second = await walletAuthHeaders(account, agentId)
    expect(first["X-Agent-Signature"]).toMatch(new RegExp(`^service-auth:${agentId}:\\d{13}:sig:0x[0-9a-f]{130}$`))
    expect(first["X-Agent-Signature"]).not.toBe(second["X-Agent-Signature"])
    const proof = await Effect.runPromise(
      verifyWalletSignature({ id: agentId, wallet: account.address }, { "x-agent-wallet": first["X-Agent-Wallet"], "x-agent-signature": first["X-Agent-Signature"] })
    )
    expect(proof.wallet).toBe(account.address.toLowerCase())
    const other = await Effect.runPromiseExit(
      verifyWalletSignature({ id: "1b6a3e0c-5d2c-4c55-a0f3-8a4c6f0a1b2c", wallet: account.address }, { "x-agent-wallet": first["X-Agent-Wallet"], "x-agent-signature": first["X-Agent-Signature"] })
    )
    expect(Exit.isFailure(other)).toBe(true)
  })
})

describe("SDK: errors", () => {
  const envelope = (code: string, details?: unknown) => ({ success: false, error: { code, message: `${code} happened`, details } })
  it("each status maps to its class, carrying the service's code, message and details", () => {
    const cases: Array<[number, string, new (...args: never[]) => MarketplaceError]> = [
      [400, "VALIDATION_ERROR", ValidationError],
      [401, "AUTH_EXPIRED", AuthenticationError],
      [402, "PAYMENT_REQUIRED", PaymentError],
      [404, "AGENT_NOT_FOUND", NotFoundError],
      [409, "INSUFFICIENT_BALANCE", ConflictError],
      [429, "RATE_LIMITED", RateLimitError],
      [502, "EXECUTION_FAILED", ExecutionError],
      [504, "EXECUTION_TIMEOUT", ExecutionError],
      [503, "AGENT_UNAVAILABLE", UnavailableError]
    ]
    for (const [status, code, Class] of cases) {
      const error = errorFromResponse(status, envelope(code, { issues: [{ path: "amount" }] }))
      expect(error).toBeInstanceOf(Class)
      expect(error).toBeInstanceOf(MarketplaceError)
      expect(error).toMatchObject({ code, status, message: `${code} happened`, details: { issues: [{ path: "amount" }] } })
    }
  })

  it("Retry-After reaches a RateLimitError; a body that is not an envelope still gives a typed error", () => {
    const limited = errorFromResponse(429, envelope("RATE_LIMITED"), "12")
    expect(limited).toBeInstanceOf(RateLimitError)
    expect(limited instanceof RateLimitError && limited.retryAfterSeconds).toBe(12)
    expect(errorFromResponse(500, "<html>")).toMatchObject({ code: "HTTP_500", status: 500 })
  })
})
