// /api/v1/payers/{wallet}/limits: a payer wallet's own spending limits, set, read and removed with its EIP-712 signature.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { CreditView, CreditWithdrawal, WithdrawCreditRequest } from "../domain/Credit.js"
import { ConflictResponse, NotFoundResponse, UnauthorizedResponse } from "../domain/Errors.js"
import { LimitsRemoved, LimitsView, PayerPath, PayerSignatureHeaders, SetLimitsRequest } from "../domain/Limits.js"
import { ok } from "./Envelope.js"

const signed = "Needs X-Payer-Signature (the wallet's EIP-712 `SpendingLimits` signature: action, payer, the limits as sent in micro-USDC, allowedAgents, signedAt) and X-Payer-Signed-At (milliseconds, at most 5 minutes old); docs/clients.md."

export class PayersApi extends HttpApiGroup.make("payers")
  .add(
    HttpApiEndpoint.put("setLimits", "/:wallet/limits")
      .setPath(PayerPath)
      .setHeaders(PayerSignatureHeaders)
      .setPayload(SetLimitsRequest)
      .addSuccess(ok(LimitsView))
      .addError(UnauthorizedResponse)
      .annotate(OpenApi.Summary, "Set the payer's spending limits (wallet signature, action \"set\")")
      .annotate(
        OpenApi.Description,
        `${signed} Replaces all limits; what is left out is no limit. Every paid call of this payer (execute over HTTP and MCP, a chain's root) is counted in its reservation; one that would break a limit is refused with 402 (details.reason spending_limit_exceeded, details.limit) before anything is reserved. Days are UTC days; a refunded call gives its amount back.`
      )
  )
  .add(
    HttpApiEndpoint.get("getLimits", "/:wallet/limits")
      .setPath(PayerPath)
      .setHeaders(PayerSignatureHeaders)
      .addSuccess(ok(LimitsView))
      .addError(UnauthorizedResponse)
      .addError(NotFoundResponse)
      .annotate(OpenApi.Summary, "The payer's spending limits and what it spent today (wallet signature, action \"read\")")
      .annotate(OpenApi.Description, `${signed} A read signature may be reused for its 5 minutes.`)
  )
  .add(
    HttpApiEndpoint.del("deleteLimits", "/:wallet/limits")
      .setPath(PayerPath)
      .setHeaders(PayerSignatureHeaders)
      .addSuccess(ok(LimitsRemoved))
      .addError(UnauthorizedResponse)
      .addError(NotFoundResponse)
      .annotate(OpenApi.Summary, "Remove the payer's spending limits (wallet signature, action \"delete\")")
      .annotate(OpenApi.Description, signed)
  )
  .add(
    HttpApiEndpoint.get("getCredit", "/:wallet/credit")
      .setPath(PayerPath)
      .setHeaders(PayerSignatureHeaders)
      .addSuccess(ok(CreditView))
      .addError(UnauthorizedResponse)
      .annotate(OpenApi.Summary, "The payer's credit: remainders of metered calls it kept (wallet signature, PayerCredit action \"read\")")
      .annotate(OpenApi.Description, "Needs X-Payer-Signature (the wallet's EIP-712 `PayerCredit` signature: action \"read\", payer, amount 0, signedAt) and X-Payer-Signed-At; docs/clients.md.")
  )
  .add(
    HttpApiEndpoint.post("withdrawCredit", "/:wallet/credit/withdraw")
      .setPath(PayerPath)
      .setHeaders(PayerSignatureHeaders)
      .setPayload(WithdrawCreditRequest)
      .addSuccess(ok(CreditWithdrawal))
      .addError(UnauthorizedResponse)
      .addError(ConflictResponse)
      .annotate(OpenApi.Summary, "Withdraw the payer's credit to its wallet on chain (wallet signature, PayerCredit action \"withdraw\")")
      .annotate(
        OpenApi.Description,
        "Needs X-Payer-Signature (EIP-712 `PayerCredit`: action \"withdraw\", payer, amount in micro-USDC or 0 for all, signedAt, signed later than the last withdrawal) and X-Payer-Signed-At. Paid in the next batch of remainders (a transferWithAuthorization from the treasury). INSUFFICIENT_CREDIT 409 when there is not that much."
      )
  )
  .prefix("/api/v1/payers") {}
