// An upto-paid call's funding steps (upto.ts): the credential recognised (an x402 v2 payload naming `upto`), decoded and
// verified against our terms and the chain before anything is reserved (layers/x402/upto/verify.ts), and a re-sent
// header found (it answers its own call; it never pays a second one).
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Networks } from "../../layers/Networks.js"
import type { PaymentCredential } from "../../layers/x402/credential.js"
import { decodeBase64Json } from "../../layers/x402/header.js"
import { PaymentRejected } from "../../layers/x402/payment.js"
import { decodeUptoPaymentSignature, namesUpto, type UptoPaymentPayloadV2 } from "../../layers/x402/upto/payload.js"
import { verifyUpto, type VerifiedUpto } from "../../layers/x402/upto/verify.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import type { X402Funding } from "../../src/domain/Funding.js"
import { type NetworkUptoTerms, UptoTerms } from "../payments/UptoTerms.js"
import { ExecutionsRepo } from "./Repo.js"
import { requestHashOf } from "./resend.js"

/** The credential of a funding that pays by upto: an x402 v2 payload naming `upto`, for a call of its own. */
export const uptoCredential = (funding: X402Funding): Effect.Effect<Option.Option<PaymentCredential>> => {
  const presented = funding.payment
  if (presented === undefined || presented instanceof PaymentRejected || presented.version !== 2 || funding.budget !== undefined) {
    return Effect.succeed(Option.none())
  }
  return decodeBase64Json(presented.raw.trim(), "PAYMENT-SIGNATURE").pipe(
    Effect.map((json) => (namesUpto(json) ? Option.some(presented) : Option.none())),
    Effect.orElseSucceed(() => Option.none<PaymentCredential>())
  )
}

/** A verified authorization, ready to be reserved. */
export interface UptoFunded {
  readonly decoded: UptoPaymentPayloadV2
  readonly terms: NetworkUptoTerms
  readonly verified: VerifiedUpto
}

/** What a header that already paid a call says about this request: that call, or another request's. */
export type UptoResent = { readonly _tag: "Same"; readonly requestId: string } | { readonly _tag: "Other"; readonly requestId: string }

export class UptoFunds extends Effect.Service<UptoFunds>()("executions/UptoFunds", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const networks = yield* Networks
    const terms = yield* UptoTerms
    const executions = yield* ExecutionsRepo

    /** The PAYMENT-SIGNATURE decoded (bounded like every x402 header), or why it cannot be read. */
    const decode = decodeUptoPaymentSignature

    /** Verified for `maximum` at `now` (unix seconds), or the refusal in x402's terms; nothing is sent. */
    const fund = (decoded: UptoPaymentPayloadV2, maximum: bigint, now: number): Effect.Effect<UptoFunded, PaymentRejected> =>
      Effect.gen(function* () {
        const ours = Option.flatMap(networks.findCaip2(decoded.accepted.network), (chain) => terms.on(chain.network))
        if (Option.isNone(ours)) {
          return yield* new PaymentRejected({ reason: "invalid_network", message: `upto is not offered on ${decoded.accepted.network}` })
        }
        const t = ours.value
        const verified = yield* verifyUpto({
          decoded,
          maximum,
          terms: { receiver: t.receiver, facilitator: t.facilitator, token: t.token, publicClient: t.chain.publicClient },
          now,
          minValiditySeconds: terms.minValiditySeconds
        })
        return { decoded, terms: t, verified } satisfies UptoFunded
      })

    /** The call an upto header already paid for (a re-send answers it), and whether this request is that call's. */
    const resent = (headerSha256: string, req: ExecuteRequest) =>
      Effect.gen(function* () {
        const [paid] = yield* sql<{ readonly subjectId: string }>`
          SELECT subject_id FROM payments WHERE header_sha256 = ${headerSha256} AND purpose = 'upto'`
        if (paid === undefined) return Option.none<UptoResent>()
        const row = yield* executions.find(paid.subjectId)
        const same = Option.isSome(row) && row.value.requestHash === requestHashOf(req, Option.none()) &&
          (row.value.idempotencyKey ?? undefined) === req.idempotencyKey
        return Option.some<UptoResent>(same ? { _tag: "Same", requestId: paid.subjectId } : { _tag: "Other", requestId: paid.subjectId })
      }).pipe(Effect.orDie)

    return { decode, fund, resent } as const
  }),
  dependencies: [UptoTerms.Default, ExecutionsRepo.Default]
}) {}
