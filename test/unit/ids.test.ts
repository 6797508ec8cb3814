import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { newRequestId, RequestId } from "../../src/domain/Ids.js"

describe("prefixed ids (16 bytes from a pooled CSPRNG block)", () => {
  it("are distinct across many pool refills and decode as their schema", () => {
    const ids = Array.from({ length: 5_000 }, () => newRequestId())
    expect(new Set(ids).size).toBe(ids.length)
    for (const id of ids.slice(0, 300)) {
      expect(id).toMatch(/^req_[A-Za-z0-9_-]{22}$/)
      expect(Schema.is(RequestId)(id)).toBe(true)
    }
  })
})
