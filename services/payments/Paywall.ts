// The one way a route takes money: a quote and the payment header in, the verified payment or the 402 answer out.
// Registration and execution use it; MCP tools and chain calls will.
import { Effect } from "effect"
import { PaymentVerifier } from "../../layers/PaymentVerifier.js"
import type { PaymentRejected, VerifiedPayment } from "../../layers/x402/payment.js"
import { PaymentRequired } from "../../src/domain/Errors.js"
import { formatUsdc } from "../../src/domain/Money.js"

/** What a call costs and what the payer is told it is for. */
export interface Quote {
  readonly amount: bigint
  /** The URL (or tool) being paid for, written into the challenge. */
  readonly resource: string
  readonly description: string
}

/** A quote turned into its x402 challenge; `refuse` answers any later rejection of the same payment with it. */
export interface Priced {
  readonly quote: Quote
  readonly accepts: PaymentRequired["accepts"]
  readonly refuse: (rejection: PaymentRejected) => PaymentRequired
}

export class Paywall extends Effect.Service<Paywall>()("payments/Paywall", {
  effect: Effect.gen(function* () {
    const verifier = yield* PaymentVerifier

    const price = (quote: Quote): Priced => {
      const accepts = [verifier.requirements(quote)]
      const details = { price: formatUsdc(quote.amount), wallet: verifier.treasury, network: verifier.network }
      return {
        quote,
        accepts,
        refuse: (rejection) =>
          new PaymentRequired({ message: rejection.message, accepts, details: { reason: rejection.reason, ...details, ...rejection.details } })
      }
    }

    /**
     * Verifies the payment for a quote (signature, amount, recipient, window, funds: everything but the database's
     * once-only guard, which the caller's reservation is). No header: the 402 challenge.
     */
    const charge = (quote: Quote, header: string | undefined): Effect.Effect<{ readonly payment: VerifiedPayment; readonly priced: Priced }, PaymentRequired> =>
      Effect.gen(function* () {
        const priced = price(quote)
        if (header === undefined || header.trim() === "") {
          return yield* new PaymentRequired({
            message: `${quote.description} costs ${formatUsdc(quote.amount)} USDC: pay with an X-PAYMENT header`,
            accepts: priced.accepts,
            details: { reason: "payment_required", price: formatUsdc(quote.amount), wallet: verifier.treasury, network: verifier.network }
          })
        }
        const payment = yield* verifier.verify(header, quote.amount).pipe(Effect.mapError(priced.refuse))
        return { payment, priced }
      }).pipe(Effect.withSpan("Paywall.charge"))

    return { charge, price, network: verifier.network } as const
  }),
  dependencies: [PaymentVerifier.Default]
}) {}
