// The one way a route takes money: a quote and the payment as presented (x402 v1 X-PAYMENT, v2 PAYMENT-SIGNATURE, or a
// decoded v2 payload from an MCP call) in; the verified payment or the 402 answer out. Registration, execution and
// MCP tools use it; it also speaks the v2 challenge and receipt so every transport answers in the payer's version.
import { Effect } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { PaymentVerifier } from "../../layers/PaymentVerifier.js"
import { channelOffer } from "../../layers/x402/batchSettlement/offer.js"
import { uptoOffer } from "../../layers/x402/upto/offer.js"
import { ChannelTerms } from "../channels/Terms.js"
import { UptoTerms } from "./UptoTerms.js"
import { type PresentedPayment, presentedFromV2Payload } from "../../layers/x402/credential.js"
import { PaymentRejected, type Presentation, type VerifiedPayment } from "../../layers/x402/payment.js"
import { PAYMENT_IDENTIFIER, paymentIdentifierDeclaration } from "../../layers/x402/paymentIdentifier.js"
import { caip2Of, paymentRequiredV2, type PaymentRequiredV2, type PaymentRequirementsV2, settleResponse } from "../../layers/x402/v2.js"
import { PaymentRequired } from "../../src/domain/Errors.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { withSpan } from "../../layers/observability/span.js"

/** What a call costs and what the payer is told it is for. */
export interface Quote {
  readonly amount: bigint
  /** The URL (or tool) being paid for, written into the challenge. */
  readonly resource: string
  readonly description: string
  /** Offer payment channels (x402 v2 `batch-settlement`) beside `exact`, where their contracts exist: paid calls only. */
  readonly channels?: boolean
  /** `amount` is a chain's whole budget (X-Chain-Budget): its channel offer suggests no deposit size. */
  readonly chainBudget?: boolean
  /**
   * Offer x402 v2 `upto` (a Permit2 authorization of `amount` as a maximum; the call settles what it used) where its
   * contracts exist: metered calls only.
   */
  readonly upto?: boolean
}

/** A quote turned into its x402 challenge; `refuse` answers any later rejection of the same payment with it. */
export interface Priced {
  readonly quote: Quote
  readonly accepts: PaymentRequired["accepts"]
  /** The channel offers (v2 only), one per network that has the contracts; empty unless the quote asked for them. */
  readonly channelOffers: ReadonlyArray<PaymentRequirementsV2>
  /** The upto offers (v2 only), one per network that has Permit2 and the upto proxy; empty unless the quote asked. */
  readonly uptoOffers: ReadonlyArray<PaymentRequirementsV2>
  /** Every v2-only offer after `exact`: the channel offers, then the upto offers. */
  readonly offersV2: ReadonlyArray<PaymentRequirementsV2>
  readonly refuse: (rejection: PaymentRejected) => PaymentRequired
}

/** An accepted payment: what was verified, how the payer presented it, and its quote's challenge. */
export interface Charged {
  readonly payment: VerifiedPayment
  readonly presentation: Presentation
  readonly priced: Priced
}

export class Paywall extends Effect.Service<Paywall>()("payments/Paywall", {
  effect: Effect.gen(function* () {
    const verifier = yield* PaymentVerifier
    const config = yield* AppConfig
    const channelTerms = yield* ChannelTerms
    const uptoTerms = yield* UptoTerms

    /** With a second network, the details name every network a payer may pay on (one network: unchanged). */
    const networksDetail = verifier.networks.length > 1 ? { networks: verifier.networks } : {}

    const price = (quote: Quote): Priced => {
      // Every configured network (the primary first); the v1 body leaves out those x402 v1 has no name for.
      const accepts = verifier.requirementsAll(quote)
      const details = { price: formatUsdc(quote.amount), wallet: verifier.treasury, network: verifier.network, ...networksDetail }
      const channelOffers = quote.channels === true
        ? channelTerms.all.map((terms) =>
          channelOffer({ terms, caip2: caip2Of(terms.chainId), amount: quote.amount, maxTimeoutSeconds: config.paymentTimeoutSeconds, tokenDomain: terms.chain.usdc,
            suggestDeposit: quote.chainBudget !== true }))
        : []
      const uptoOffers = quote.upto === true
        ? uptoTerms.all.map((terms) => uptoOffer({
          caip2: caip2Of(terms.chain.chainId),
          maximum: quote.amount,
          token: terms.token,
          receiver: terms.receiver,
          facilitator: terms.facilitator,
          maxTimeoutSeconds: uptoTerms.maxTimeoutSeconds,
          tokenDomain: terms.chain.usdc
        }))
        : []
      const offersV2 = [...channelOffers, ...uptoOffers]
      return {
        quote,
        accepts,
        channelOffers,
        uptoOffers,
        offersV2,
        refuse: (rejection) =>
          new PaymentRequired({ message: rejection.message, accepts, offersV2, details: { reason: rejection.reason, ...details, ...rejection.details } })
      }
    }

    /**
     * Verifies the payment for a quote (signature, amount, recipient, window, funds: everything but the database's
     * once-only guard, which the caller's reservation is). No payment: the 402 challenge.
     */
    const charge = (quote: Quote, presented: PresentedPayment): Effect.Effect<Charged, PaymentRequired> =>
      Effect.gen(function* () {
        const priced = price(quote)
        if (presented === undefined) {
          return yield* new PaymentRequired({
            message: `${quote.description} costs ${formatUsdc(quote.amount)} USDC: pay with a PAYMENT-SIGNATURE (x402 v2) or X-PAYMENT (x402 v1) header`,
            accepts: priced.accepts,
            offersV2: priced.offersV2,
            details: { reason: "payment_required", price: formatUsdc(quote.amount), wallet: verifier.treasury, network: verifier.network, ...networksDetail }
          })
        }
        if (presented instanceof PaymentRejected) return yield* priced.refuse(presented)
        const { payment, presentation } = yield* verifier.verifyCredential(presented, quote.amount).pipe(Effect.mapError(priced.refuse))
        return { payment, presentation, priced }
      }).pipe(withSpan("Paywall.charge"))

    /**
     * Charges from an x402 v2 PaymentPayload object that arrived already decoded (an MCP client's
     * `params._meta["x402/payment"]`); `undefined` or `null` is no payment (the challenge).
     */
    const chargeV2Payload = (quote: Quote, payload: unknown) => charge(quote, presentedFromV2Payload(payload))

    /**
     * The x402 v2 PaymentRequired object of a 402 (the PAYMENT-REQUIRED header's JSON; an MCP paid tool's error result),
     * on the CAIP-2 network; `paymentIdentifier` declares the payment-identifier extension for routes that honour it.
     */
    const challengeV2 = (
      error: PaymentRequired,
      options: { readonly paymentIdentifier?: boolean; readonly extensions?: Readonly<Record<string, unknown>> } = {}
    ): PaymentRequiredV2 => {
      const reason = error.details["reason"]
      const required = paymentRequiredV2(
        { accepts: error.accepts, error: typeof reason === "string" ? reason : "payment_required" },
        verifier.caip2For,
        { ...options.extensions, ...(options.paymentIdentifier === true ? { [PAYMENT_IDENTIFIER]: paymentIdentifierDeclaration } : {}) }
      )
      return error.offersV2 === undefined || error.offersV2.length === 0 ? required : { ...required, accepts: [...required.accepts, ...error.offersV2] }
    }

    /**
     * The settlement receipt `{success, transaction, network, payer}` in the terms of the payer's version, with a paid
     * call's signed receipt under `extensions.receipt` when given.
     */
    const receipt = (presentation: Pick<Presentation, "network">, settlement: { readonly txHash: string; readonly payer: string; readonly amount?: bigint | undefined }, signed?: unknown) =>
      settleResponse({ txHash: settlement.txHash, network: presentation.network, payer: settlement.payer, amount: settlement.amount }, signed)

    return { charge, chargeV2Payload, challengeV2, receipt, price, network: verifier.network, caip2: verifier.caip2, caip2For: verifier.caip2For } as const
  }),
  dependencies: [PaymentVerifier.Default, ChannelTerms.Default, UptoTerms.Default]
}) {}
