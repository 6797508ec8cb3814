// The x402 v1 payment requirements: one `accepts[]` entry of a 402 challenge.
import { Schema } from "effect"

/** The x402 v1 `accepts[]` entry (what to pay, to whom, on which network). */
export const PaymentRequirements = Schema.Struct({
  scheme: Schema.Literal("exact"),
  network: Schema.String,
  maxAmountRequired: Schema.String,
  resource: Schema.String,
  description: Schema.String,
  mimeType: Schema.String,
  payTo: Schema.String,
  maxTimeoutSeconds: Schema.Number,
  asset: Schema.String,
  extra: Schema.Struct({ name: Schema.String, version: Schema.String })
}).annotations({ identifier: "PaymentRequirements" })
export type PaymentRequirements = typeof PaymentRequirements.Type
