import { describe, expect, it } from "vitest"
import { limitRefusal, utcDay } from "../../services/limits/statements.js"

const sqlError = (cause: unknown) => ({ _tag: "SqlError", cause })

describe("spending limits: the refusal the reservation statement raises", () => {
  it("an SL402 becomes a spending_limit_exceeded rejection whose details name the limit, amounts in USDC", () => {
    const rejection = limitRefusal(sqlError({
      code: "SL402",
      message: "the call would exceed the payer's daily limit",
      detail: JSON.stringify({ limit: "perDayMax", max: "77000", spent: "77000", amount: "11000", day: "2026-11-27", agentId: null })
    }))
    expect(rejection?.reason).toBe("spending_limit_exceeded")
    expect(rejection?.message).toContain("daily limit")
    expect(rejection?.details).toEqual({ limit: "perDayMax", max: "0.077000", spent: "0.077000", amount: "0.011000", day: "2026-11-27" })
  })

  it("any other database error is not a refusal; a garbled detail still refuses, without details", () => {
    expect(limitRefusal(sqlError({ code: "23505", constraint: "payments_authorization_key" }))).toBeUndefined()
    expect(limitRefusal(new Error("x"))).toBeUndefined()
    expect(limitRefusal(sqlError({ code: "SL402", message: "m", detail: "not json" }))?.details).toEqual({})
  })

  it("days are UTC calendar days", () => {
    expect(utcDay(Date.UTC(2026, 10, 27, 23, 59, 59, 999))).toBe("2026-11-27")
    expect(utcDay(Date.UTC(2026, 10, 28, 0, 0, 0, 0))).toBe("2026-11-28")
  })
})
