// Payers' receipts of paid calls: signed when a paid answer is given (one Ed25519 signature, no database work) and on
// GET /api/v1/execute/:requestId/receipt, from the stored execution; the same execution always signs the same bytes.
import { Effect, Option } from "effect"
import { AgentProxy } from "../../layers/AgentProxy.js"
import { holdsPayment } from "../../layers/x402/credential.js"
import { Forbidden, NotFound } from "../../src/domain/Errors.js"
import { Paywall } from "../payments/Paywall.js"
import { type ExecutionReceipt, receiptFields, receiptSignedBytes, type ReceiptRow } from "./receipt.js"
import { ExecutionsRepo } from "./Repo.js"

export class Receipts extends Effect.Service<Receipts>()("executions/Receipts", {
  effect: Effect.gen(function* () {
    const proxy = yield* AgentProxy
    const paywall = yield* Paywall
    const repo = yield* ExecutionsRepo

    /** The signed receipt of a completed, settled, x402-paid execution; null when it has none (receipt.ts says when). */
    const issue = (row: ReceiptRow & { readonly paymentNetwork?: string | undefined }): ExecutionReceipt | null => {
      // The CAIP-2 id of the network the payment was made on (the primary's for a row that does not say).
      const network = row.paymentNetwork === undefined ? paywall.caip2 : paywall.caip2For(row.paymentNetwork)
      const fields = receiptFields(row, network, proxy.signingKey.keyId)
      return fields === undefined ? null : { ...fields, signature: proxy.signBytes(receiptSignedBytes(fields)) }
    }

    /** The receipt for the holder of the execution's payment header (the same proof as the status's output). */
    const read = (id: string, proofs: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const found = yield* repo.find(id).pipe(Effect.orDie)
        if (Option.isNone(found)) return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${id}` })
        const row = found.value
        if (!holdsPayment(proofs, row.headerSha256)) {
          return yield* new Forbidden({
            code: "RECEIPT_NOT_AUTHORIZED",
            message: "send the payment header of the execution (its X-PAYMENT-USED value) as X-PAYMENT or PAYMENT-SIGNATURE"
          })
        }
        const receipt = issue(row)
        if (receipt === null) {
          return yield* new NotFound({
            code: "RECEIPT_NOT_FOUND",
            message: `execution ${id} has no receipt: it is ${row.status} with its settlement ${row.settlementState}${row.chainId === null ? "" : ", paid from a chain's budget"}`,
            details: { status: row.status, settlement: row.settlementState }
          })
        }
        return receipt
      }).pipe(Effect.withSpan("Receipts.read"))

    return { issue, read } as const
  }),
  dependencies: [AgentProxy.Default, Paywall.Default, ExecutionsRepo.Default]
}) {}
