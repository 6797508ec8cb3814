// A webhook delivery's two signatures, from the one whsec_ secret: a receiver written from the spec's one line on
// X-Webhook-Signature verifies it, and so does the unmodified `standardwebhooks` package; docs/webhooks.md's receivers
// are verbatim copies of the regions below.
import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { deliveryHeaders } from "../../services/webhooks/signing.js"

// #region docs:webhook-spec-receiver
import { createHmac, timingSafeEqual } from "node:crypto"

/** X-Webhook-Signature: `sha256=` + lowercase hex HMAC-SHA256 of the raw body, keyed with the secret as returned. */
const verifySpecSignature = (secret: string, rawBody: string, header: string | undefined) => {
  const expected = `sha256=${createHmac("sha256", secret).update(rawBody).digest("hex")}`
  const given = header ?? ""
  return given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected))
}
// #endregion

// #region docs:webhook-library-receiver
import { Webhook } from "standardwebhooks" // or: import { Webhook } from "svix"

/** Standard Webhooks' headers (webhook-id, webhook-timestamp, webhook-signature); throws when they do not verify. */
const verifyWithLibrary = (secret: string, rawBody: string, headers: Record<string, string>) =>
  new Webhook(secret).verify(rawBody, headers)
// #endregion

/** A secret as POST /webhooks returns it (whsec_ + base64 of 24 random bytes), fixed so a failure is reproducible. */
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
const body = JSON.stringify({ event: "execution.completed", timestamp: "2026-11-26T23:00:00.000Z", data: { requestId: "req_1", earnings: "0.008500" } })
const signed = (at: number, secret = SECRET) =>
  deliveryHeaders({ secret, subscriptionId: "wh_1", deliveryId: "del_1", eventType: "execution.completed", attempt: 1, body, at })

describe("webhook signatures", () => {
  it("a receiver written from the spec's line (HMAC keyed with the secret as returned) verifies X-Webhook-Signature", () => {
    const headers = signed(Date.parse("2026-11-26T23:00:00Z"))
    expect(verifySpecSignature(SECRET, body, headers["x-webhook-signature"])).toBe(true)
    expect(headers["x-webhook-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/)
    // Another body, another secret, or the Standard Webhooks key bytes (base64 after whsec_) do not verify.
    expect(verifySpecSignature(SECRET, body.replace("0.008500", "9.008500"), headers["x-webhook-signature"])).toBe(false)
    expect(verifySpecSignature("whsec_AfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", body, headers["x-webhook-signature"])).toBe(false)
    const decodedKey = Buffer.from(SECRET.slice("whsec_".length), "base64")
    expect(headers["x-webhook-signature"]).not.toBe(`sha256=${createHmac("sha256", decodedKey).update(body).digest("hex")}`)
  })

  it("the unmodified standardwebhooks package verifies webhook-signature of the same delivery, keyed with the decoded bytes", () => {
    // The library checks webhook-timestamp against its own clock (5 minutes either way): sign at the real time.
    const headers = signed(Date.now())
    expect(verifyWithLibrary(SECRET, body, headers)).toMatchObject({ event: "execution.completed" })
    expect(() => verifyWithLibrary(SECRET, body.replace("req_1", "req_2"), headers)).toThrow()
    // As the standard defines it: v1, base64 HMAC of "id.timestamp.body" with the bytes after whsec_.
    const decodedKey = Buffer.from(SECRET.slice("whsec_".length), "base64")
    const content = `${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`
    expect(headers["webhook-signature"]).toBe(`v1,${createHmac("sha256", decodedKey).update(content).digest("base64")}`)
  })
})

describe("docs/webhooks.md", () => {
  const root = fileURLToPath(new URL("../../", import.meta.url))
  const docs = readFileSync(`${root}docs/webhooks.md`, "utf8")
  const source = readFileSync(fileURLToPath(import.meta.url), "utf8")
  const regionOf = (region: string) => {
    const start = source.indexOf(`// #region ${region}\n`)
    const text = source.slice(source.indexOf("\n", start) + 1)
    return text.slice(0, text.indexOf("// #endregion"))
  }
  const snippetOf = (region: string) =>
    docs.match(new RegExp(`<!-- from test/unit/webhookSigning\\.test\\.ts#${region} -->\\n\`\`\`ts\\n([\\s\\S]*?)\`\`\``))?.[1]

  it.each(["docs:webhook-spec-receiver", "docs:webhook-library-receiver"])("its receiver %s is a verbatim copy of the tested region", (region) => {
    expect(snippetOf(region)).toBe(regionOf(region))
  })
})
