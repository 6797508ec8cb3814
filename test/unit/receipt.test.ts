// The payer's receipt, pure: fields derived from an execution row, signed bytes, and the checks (server and SDK) that
// refuse any changed field or another key.
import { describe, expect, it } from "@effect/vitest"
import * as crypto from "node:crypto"
import { canonicalJson as sdkCanonicalJson, contentSha256, verifyReceipt as sdkVerify } from "../../sdk/src/receipts.js"
import { type ExecutionReceipt, receiptFields, receiptSignedBytes, type ReceiptRow, sha256Hex, verifyReceipt } from "../../services/executions/receipt.js"
import { canonicalJson } from "../../src/domain/Json.js"

const row: ReceiptRow = {
  id: "req_abcdefgh1234",
  payer: "0x1111111111111111111111111111111111111111",
  agentId: "7d1e4a7e-5e3a-4c39-9a57-0f1f4c1a2b3c",
  capabilityId: "echo",
  input: { text: "héllo", nested: { b: 2, a: [1, "x"] } },
  output: { echo: { text: "héllo" }, requestId: "req_abcdefgh1234" },
  status: "completed",
  price: 11_000n,
  platformFee: 1_000n,
  agentFee: 10_000n,
  chainId: null,
  completedAt: new Date("2026-11-27T02:00:00.123Z"),
  settlementState: "settled",
  settlementTxHash: `0x${"ab".repeat(32)}`
}

const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519")
const keyId = crypto.createHash("sha256").update(publicKey.export({ format: "der", type: "spki" })).digest("hex").slice(0, 16)
const sign = (fields: NonNullable<ReturnType<typeof receiptFields>>): ExecutionReceipt => ({
  ...fields,
  signature: crypto.sign(null, receiptSignedBytes(fields), privateKey).toString("base64")
})

describe("receipts", () => {
  it("a flat call's receipt: one unit at the agent's price, the platform fee, authorised = charged, nothing returned, hashes of canonical input and output", () => {
    const fields = receiptFields(row, "eip155:84532", keyId)
    expect(fields).toEqual({
      receiptVersion: 1,
      requestId: row.id,
      payer: row.payer,
      agentId: row.agentId,
      capabilityId: "echo",
      network: "eip155:84532",
      transaction: row.settlementTxHash,
      unit: "call",
      unitsUsed: "1",
      unitPrice: "10000",
      platformFee: "1000",
      authorized: "11000",
      charged: "11000",
      returned: "0",
      requestSha256: sha256Hex(canonicalJson(row.input)),
      responseSha256: sha256Hex(canonicalJson(row.output)),
      completedAt: "2026-11-27T02:00:00.123Z",
      keyId
    })
    // The payer hashes what it sent and received the same way with the SDK, whatever the key order.
    expect(fields?.requestSha256).toBe(contentSha256({ nested: { a: [1, "x"], b: 2 }, text: "héllo" }))
    expect(fields?.responseSha256).toBe(contentSha256(row.output))
    expect(sdkCanonicalJson(row.input)).toBe(canonicalJson(row.input))
  })

  it("the same execution always gives the same bytes and the same signature (Ed25519 is deterministic)", () => {
    const a = sign(receiptFields(row, "eip155:84532", keyId)!)
    const b = sign(receiptFields({ ...row, input: JSON.parse(JSON.stringify(row.input)) }, "eip155:84532", keyId)!)
    expect(JSON.stringify(b)).toBe(JSON.stringify(a))
  })

  it("a signed receipt verifies with the service's key (server check and the SDK's, by KeyObject, PEM or key id)", () => {
    const receipt = sign(receiptFields(row, "eip155:84532", keyId)!)
    expect(verifyReceipt(receipt, publicKey)).toBe(true)
    expect(sdkVerify(receipt, publicKey)).toBe(true)
    expect(sdkVerify(receipt, publicKey.export({ format: "pem", type: "spki" }).toString())).toBe(true)
    expect(sdkVerify(receipt, { keyId, key: publicKey })).toBe(true)
    // A receipt that went through JSON (a header, a file) still verifies.
    expect(sdkVerify(JSON.parse(JSON.stringify(receipt)), publicKey)).toBe(true)
  })

  it("changing any field, the signature, or checking with another key fails", () => {
    const receipt = sign(receiptFields(row, "eip155:84532", keyId)!)
    for (const [name, value] of Object.entries(receipt)) {
      const changed = name === "receiptVersion" ? 2 : name === "signature" ? crypto.sign(null, Buffer.from("other"), privateKey).toString("base64") : `${String(value)}0`
      const tampered = { ...receipt, [name]: changed } as ExecutionReceipt
      expect(verifyReceipt(tampered, publicKey), name).toBe(false)
      expect(sdkVerify(tampered, publicKey), name).toBe(false)
    }
    expect(sdkVerify({ ...receipt, charged: "0", returned: "11000" }, publicKey)).toBe(false)
    const { signature: _signature, ...unsigned } = receipt
    expect(sdkVerify({ ...unsigned, extra: "field", signature: receipt.signature } as ExecutionReceipt, publicKey)).toBe(false)
    expect(sdkVerify({ ...receipt, signature: "not base64!" }, publicKey)).toBe(false)
    const other = crypto.generateKeyPairSync("ed25519").publicKey
    expect(verifyReceipt(receipt, other)).toBe(false)
    expect(sdkVerify(receipt, other)).toBe(false)
    expect(sdkVerify(receipt, { keyId: "0000000000000000", key: publicKey })).toBe(false)
  })

  it("no receipt for a call that did not complete, whose payment is not settled, or that a chain's budget paid", () => {
    for (const changed of [
      { status: "failed" as const, output: null },
      { status: "pending" as const },
      { status: "refunded" as const },
      { settlementState: "reserved" as const, settlementTxHash: null },
      { settlementState: "failed" as const },
      { chainId: "chn_abc" },
      { completedAt: null }
    ]) {
      expect(receiptFields({ ...row, ...changed }, "eip155:84532", keyId), JSON.stringify(changed)).toBeUndefined()
    }
  })
})
