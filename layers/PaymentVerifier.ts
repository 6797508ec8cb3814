// x402 "exact" payments on EVM as a service (v1 and v2): the 402 challenge's `accepts` entry, verification of a payment
// credential (X-PAYMENT or PAYMENT-SIGNATURE), and settlement through a facilitator when the treasury key is not held
// here (with a local key, settlements are treasury transactions: services/treasury/TreasuryWriter.ts signs them).
import { Effect, Option } from "effect"
import type { Hex } from "viem"
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

    /** The x402 `accepts[]` entry for a price. */
    const requirements = (input: { readonly amount: bigint; readonly resource: string; readonly description: string }): PaymentRequirements => ({
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

    /** Moves the money through the facilitator; returns the transaction hash. */
    const settle = (p: VerifiedPayment, paymentRequirements: PaymentRequirements): Effect.Effect<Hex, SettlementError> =>
      Option.match(config.facilitatorUrl, {
        onNone: () =>
          Effect.fail(new SettlementError({ reason: "settlement_failed", message: "no facilitator is configured (FACILITATOR_URL)", final: false })),
        onSome: (url) => settleWithFacilitator(p, url, paymentRequirements)
      }).pipe(Effect.withSpan("PaymentVerifier.settle"))

    const { verify, verifyCredential, caip2 } = makeVerify(chain, config, smartAccounts)
    return {
      requirements,
      verify,
      verifyCredential,
      settle,
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
