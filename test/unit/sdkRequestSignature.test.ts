// The SDK's check of requests to agents, against the service's own signing bytes (layers/outbound/signing.ts): a
// genuine request passes, and every tampering (body, request id, timestamp, key id, signature, scheme, spelling) is refused.
import { checkMarketplaceRequest, createAgent, type MarketplaceKey } from "@agent-marketplace/sdk"
import { createHash, createPublicKey, generateKeyPairSync, sign } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "vitest"
import { signedPayload } from "../../layers/outbound/signing.js"

const { privateKey, publicKey } = generateKeyPairSync("ed25519")
const keyId = createHash("sha256").update(publicKey.export({ format: "der", type: "spki" })).digest("hex").slice(0, 16)
const trusted: MarketplaceKey = { keyId, key: createPublicKey(publicKey.export({ format: "pem", type: "spki" })) }
const NOW = 1_790_000_000_000

/** A request as the marketplace's proxy signs it. */
const signed = (body: { requestId: string; capabilityId: string; input: unknown }, at = NOW, key = privateKey, id = keyId) => {
  const raw = JSON.stringify(body)
  const signature = sign(null, signedPayload(at, body.requestId, raw), key).toString("base64")
  return {
    raw,
    headers: {
      "x-marketplace-timestamp": String(at),
      "x-request-id": body.requestId,
      "x-marketplace-key-id": id,
      "x-marketplace-signature": `ed25519=${signature}`
    } as Record<string, string>
  }
}

const genuine = () => signed({ requestId: "req_abcdefgh12345678", capabilityId: "summarize", input: { text: "hello" } })

describe("SDK: request signatures (docs/agent-requests.md)", () => {
  it("a request the marketplace signed passes, as a string or as bytes", () => {
    const { raw, headers } = genuine()
    expect(checkMarketplaceRequest(headers, raw, trusted, NOW)).toBeUndefined()
    expect(checkMarketplaceRequest(headers, Buffer.from(raw), trusted, NOW + 299_000)).toBeUndefined()
  })

  it("every tampering is refused", () => {
    const { raw, headers } = genuine()
    const check = (h: Record<string, string>, body = raw, now = NOW) => checkMarketplaceRequest(h, body, trusted, now)
    const other = generateKeyPairSync("ed25519").privateKey
    const signature = headers["x-marketplace-signature"]!
    const flipped = `ed25519=${Buffer.from(Buffer.from(signature.slice(8), "base64").map((b, i) => (i === 0 ? b ^ 1 : b))).toString("base64")}`
    // The last base64 character before "==" carries 4 padding bits: another spelling of the same bytes.
    const encoded = signature.slice(8)
    const last = encoded[85]!
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    const respelled = `ed25519=${encoded.slice(0, 85)}${alphabet[(alphabet.indexOf(last) & ~0xf) | ((alphabet.indexOf(last) + 1) & 0xf)]}==`
    expect(Buffer.from(respelled.slice(8), "base64")).toEqual(Buffer.from(encoded, "base64"))
    const cases: Array<[string, string | undefined]> = [
      ["body changed", check(headers, raw.replace("hello", "hellO"))],
      ["body with a space added", check(headers, `${raw} `)],
      ["request id header changed", check({ ...headers, "x-request-id": "req_abcdefgh12345679" })],
      ["body's request id differs from the signed one", check(signed({ requestId: "req_abcdefgh12345678", capabilityId: "x", input: {} }).headers, JSON.stringify({ requestId: "req_other0000000000", capabilityId: "x", input: {} }))],
      ["timestamp changed", check({ ...headers, "x-marketplace-timestamp": String(NOW + 1) })],
      ["stale", check(headers, raw, NOW + 5 * 60_000 + 1)],
      ["from the future", check(headers, raw, NOW - 5 * 60_000 - 1)],
      ["another key id", check({ ...headers, "x-marketplace-key-id": "0000000000000000" })],
      ["signed by another key under our key id", check(signed(JSON.parse(raw), NOW, other).headers)],
      ["a bit of the signature flipped", check({ ...headers, "x-marketplace-signature": flipped })],
      ["the signature respelled", check({ ...headers, "x-marketplace-signature": respelled })],
      ["another scheme", check({ ...headers, "x-marketplace-signature": signature.replace("ed25519=", "rsa=") })],
      ["no signature", check(Object.fromEntries(Object.entries(headers).filter(([k]) => k !== "x-marketplace-signature")))],
      ["no timestamp", check(Object.fromEntries(Object.entries(headers).filter(([k]) => k !== "x-marketplace-timestamp")))],
      ["a non-numeric timestamp", check({ ...headers, "x-marketplace-timestamp": `${NOW}.0` })]
    ]
    for (const [name, refusal] of cases) expect(refusal, name).toBeDefined()
  })

  it("createAgent's handler answers a signed call, refuses an unsigned or invalid one with 401/400, and cannot hire outside a chain", async () => {
    const agent = createAgent({
      marketplaceUrl: "http://127.0.0.1:1",
      name: "Summariser",
      trustedKey: trusted,
      now: () => NOW,
      capabilities: {
        summarize: {
          description: "first words",
          price: "0.01",
          inputSchema: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
          handler: (input: { text: string }) => ({ summary: input.text.split(" ")[0] ?? "" })
        },
        hire: {
          description: "tries to hire",
          price: "0.01",
          handler: async (_input, ctx) => {
            await ctx.hire("00000000-0000-0000-0000-000000000000", "summarize", { text: "x" })
            return {}
          }
        }
      }
    })
    const server = createServer(agent.handler)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
    const post = async (s: { raw: string; headers: Record<string, string> }) => {
      const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...s.headers }, body: s.raw })
      return { status: r.status, body: (await r.json()) as Record<string, unknown> }
    }
    try {
      expect(await post(signed({ requestId: "req_abcdefgh00000001", capabilityId: "summarize", input: { text: "hello world" } }))).toEqual({ status: 200, body: { summary: "hello" } })
      const tampered = signed({ requestId: "req_abcdefgh00000002", capabilityId: "summarize", input: { text: "hello world" } })
      expect((await post({ ...tampered, raw: tampered.raw.replace("hello", "HELLO") })).status).toBe(401)
      expect((await post({ raw: tampered.raw, headers: {} })).status).toBe(401)
      const invalid = await post(signed({ requestId: "req_abcdefgh00000003", capabilityId: "summarize", input: { text: 42 } }))
      expect(invalid.status).toBe(400)
      expect((await post(signed({ requestId: "req_abcdefgh00000004", capabilityId: "nope", input: {} }))).status).toBe(404)
      const hire = await post(signed({ requestId: "req_abcdefgh00000005", capabilityId: "hire", input: {} }))
      expect(hire.status).toBe(500)
      expect(String(hire.body["error"])).toMatch(/X-Chain-Token/)
    } finally {
      server.close()
    }
  })
})
