// The payer's signed receipt of a paid call on the wire (services/executions/receipt.ts builds and signs it).
import { Schema } from "effect"

const atomic = (description: string) => Schema.String.pipe(Schema.pattern(/^\d+$/)).annotations({ description: `${description} (USDC atomic units: micro-USDC)` })

export const ExecutionReceipt = Schema.Struct({
  receiptVersion: Schema.Literal(1),
  requestId: Schema.String,
  payer: Schema.String,
  agentId: Schema.String,
  capabilityId: Schema.String,
  network: Schema.String.annotations({ description: "CAIP-2 network of the settlement" }),
  transaction: Schema.String.annotations({ description: "The settlement's transaction hash (empty for a call paid from credit)" }),
  funding: Schema.optional(Schema.Literal("credit", "channel")).annotations({ description: "Only on a call paid from the payer's credit or by a channel voucher: no settlement of its own" }),
  scheme: Schema.optional(Schema.Literal("batch-settlement", "upto")).annotations({
    description: "Only on a call paid by a channel voucher (batch-settlement) or an upto authorization (upto: `authorized` is its maximum, `charged` what settled): the x402 scheme"
  }),
  channelId: Schema.optional(Schema.String).annotations({ description: "Only on a call paid by a channel voucher: the channel `charged` was taken from" }),
  unit: Schema.String.annotations({ description: "What a unit is: `call` for flat pricing" }),
  unitsUsed: Schema.String,
  unitPrice: atomic("The agent's price per unit"),
  platformFee: atomic("The marketplace's fee per call, part of `charged`"),
  authorized: atomic("What the payment authorised"),
  charged: atomic("What the call cost"),
  returned: atomic("What goes back to the payer: authorized - charged"),
  requestSha256: Schema.String.annotations({ description: "Hex sha256 of the canonical JSON of the input" }),
  responseSha256: Schema.String.annotations({ description: "Hex sha256 of the canonical JSON of the output" }),
  completedAt: Schema.String,
  keyId: Schema.String.annotations({ description: "The signing key's id (GET /api/v1/platform/signing-key)" }),
  signature: Schema.String.annotations({ description: "Base64 Ed25519 signature over the canonical JSON of every other field" })
}).annotations({ identifier: "ExecutionReceipt" })
