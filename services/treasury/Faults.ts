// Test seams that stand in for a crash or an attacker at a precise step of a money path (the default does nothing).
import { Context, Effect } from "effect"
import type { VerifiedPayment } from "../../layers/x402/payment.js"

export interface MoneyFaultsShape {
  /** After a payment was verified and reserved, before we settle it (a front-runner's moment). */
  readonly beforeSettle: (payment: VerifiedPayment) => Effect.Effect<void>
  /** After a treasury transaction's signed bytes are stored, before they are broadcast (a crash's moment). */
  readonly afterSign: (tx: { readonly id: string; readonly purpose: string }) => Effect.Effect<void>
  /** After they were broadcast, before the receipt is read and booked. */
  readonly afterBroadcast: (tx: { readonly id: string; readonly purpose: string }) => Effect.Effect<void>
  /** After an upto call's charge was recorded, before its settle is simulated or signed (services/payments/UptoSettlements.ts). */
  readonly beforeUptoSettle: (paymentId: string) => Effect.Effect<void>
}

export class MoneyFaults extends Context.Reference<MoneyFaults>()("treasury/MoneyFaults", {
  defaultValue: (): MoneyFaultsShape => ({
    beforeSettle: () => Effect.void,
    afterSign: () => Effect.void,
    afterBroadcast: () => Effect.void,
    beforeUptoSettle: () => Effect.void
  })
}) {}
