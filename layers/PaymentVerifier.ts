// x402 "exact" payments on EVM as a service (v1 and v2): the 402 challenge's `accepts` entry, verification of a payment
// credential (X-PAYMENT or PAYMENT-SIGNATURE), and settlement through a facilitator when the treasury key is not held
// here (with a local key, settlements are treasury transactions: services/treasury/TreasuryWriter.ts signs them).
import { Effect, Either, Option } from "effect"
import type { Hex } from "viem"
import type { ChainShape } from "./Chain.js"
import { Networks } from "./Networks.js"
import type { PaymentCredential } from "./x402/credential.js"
import { decodePaymentHeader } from "./x402/header.js"
import { caip2Of, decodePaymentSignatureHeader } from "./x402/v2.js"
import type { PaymentRequirements } from "./x402/requirements.js"
import { AppConfig } from "./Config.js"
import { Chain } from "./Chain.js"
import { settleWithFacilitator } from "./x402/facilitator.js"
import { SettlementError, type VerifiedPayment } from "./x402/payment.js"
import { SmartAccountConfig } from "./x402/smartAccount.js"
import { makeVerify } from "./x402/verify.js"

export class PaymentVerifier extends Effect.Service<PaymentVerifier>()("PaymentVerifier", {
  effect: Effect.gen(function* () {
    const chain = yield* Chain
    const config = yield* AppConfig
    const smartAccounts = yield* SmartAccountConfig
    const networks = yield* Networks

    /** The x402 `accepts[]` entry for a price on one network. */
    const requirementsOn = (chain: ChainShape, input: { readonly amount: bigint; readonly resource: string; readonly description: string }): PaymentRequirements => ({
      scheme: "exact",
      network: chain.network,
      maxAmountRequired: input.amount.toString(),
      resource: input.resource,
      description: input.description,
      mimeType: "application/json",
      payTo: chain.treasury,
      maxTimeoutSeconds: config.paymentTimeoutSeconds,
      asset: chain.usdc.address,
      extra: { name: chain.usdc.name, version: chain.usdc.version }
    })
    /** The primary network's `accepts[]` entry for a price. */
    const requirements = (input: { readonly amount: bigint; readonly resource: string; readonly description: string }) => requirementsOn(chain, input)
    /** One `accepts[]` entry per configured network, the primary first (a 402 challenge offers them all). */
    const requirementsAll = (input: { readonly amount: bigint; readonly resource: string; readonly description: string }) =>
      networks.all.map((c) => requirementsOn(c, input))

    /** Moves the money through the facilitator; returns the transaction hash. */
    const settle = (p: VerifiedPayment, paymentRequirements: PaymentRequirements): Effect.Effect<Hex, SettlementError> =>
      Option.match(config.facilitatorUrl, {
        onNone: () =>
          Effect.fail(new SettlementError({ reason: "settlement_failed", message: "no facilitator is configured (FACILITATOR_URL)", final: false })),
        onSome: (url) => settleWithFacilitator(p, url, paymentRequirements)
      }).pipe(Effect.withSpan("PaymentVerifier.settle"))

    const primary = makeVerify(chain, config, smartAccounts)
    const { caip2 } = primary
    const others = networks.all.slice(1).map((c) => ({ chain: c, caip2: caip2Of(c.chainId), verifier: makeVerify(c, config, smartAccounts) }))

    /**
     * The verifier of the network a credential names (its v1 `network`, its v2 `accepted.network`). With one network
     * configured it is the primary's without a look (no extra decoding on the hot path); a credential that does not
     * decode, or names no configured network, goes to the primary's, which refuses it with the reason.
     */
    const verifierFor = (credential: PaymentCredential) => {
      if (others.length === 0) return primary
      const raw = credential.raw.trim()
      const named = credential.version === 1
        ? Either.map(Effect.runSync(Effect.either(decodePaymentHeader(raw))), (p) => others.find((o) => o.chain.network === p.network))
        : Either.map(Effect.runSync(Effect.either(decodePaymentSignatureHeader(raw))), (p) => others.find((o) => o.caip2 === p.accepted.network))
      return Either.isRight(named) && named.right !== undefined ? named.right.verifier : primary
    }
    const verifyCredential: typeof primary.verifyCredential = (credential, amount) => verifierFor(credential).verifyCredential(credential, amount)
    const verify: typeof primary.verify = (header, amount) => verifierFor({ version: 1, raw: header }).verify(header, amount)
    /** The x402 v2 (CAIP-2) id of a configured network's name; the primary's for a name not configured. */
    const caip2ByName = new Map(networks.all.map((c) => [c.network, caip2Of(c.chainId)]))
    const caip2For = (network: string) => caip2ByName.get(network) ?? caip2

    return {
      requirements,
      requirementsAll,
      caip2For,
      verify,
      verifyCredential,
      settle,
      /** Every configured network's name, the primary first. */
      networks: networks.all.map((c) => c.network),
      /** The x402 v1 network name ("base-sepolia"). */
      network: chain.network,
      /** The same network as x402 v2 names it (CAIP-2, "eip155:84532"). */
      caip2,
      treasury: chain.treasury,
      /** Which counterfactual (ERC-6492) accounts' factories we deploy with, and the on-chain check's bound. */
      smartAccounts
    } as const
  })
}) {}
