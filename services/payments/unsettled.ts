// The reservation's refusal of a payment that the payer's balance covers only without its other unsettled payments
// (`payer_funds_cover`, migrations/0038): the SQLSTATE it raises read back as the 402 rejection.
import { PaymentRejected } from "../../layers/x402/payment.js"

/** The SQLSTATE `payer_funds_cover` raises. */
const FUNDS_REFUSED = "PF402"

const detailOf = (cause: object): Record<string, unknown> => {
  if (!("detail" in cause) || typeof cause.detail !== "string") return {}
  try {
    const value: unknown = JSON.parse(cause.detail)
    return typeof value === "object" && value !== null ? Object.fromEntries(Object.entries(value)) : {}
  } catch {
    return {}
  }
}

/** The refusal a PF402 carries, as the payment rejection the 402 answers with; else undefined. */
export const unsettledRefusal = (error: unknown): PaymentRejected | undefined => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
  if (typeof cause !== "object" || cause === null || !("code" in cause) || cause.code !== FUNDS_REFUSED) return undefined
  const detail = detailOf(cause)
  return new PaymentRejected({
    reason: "insufficient_funds",
    message: "the payer's USDC balance does not cover this payment together with its payments not settled yet; nothing was reserved or charged (try again once they settle)",
    details: { balance: detail["balance"], unsettled: detail["unsettled"], required: detail["amount"], retryable: true }
  })
}
