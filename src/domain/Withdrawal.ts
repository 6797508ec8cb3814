// Wire schemas of withdrawals (spec sections 2 and 4): the request, the accepted answer, the Withdrawal view.
import { Schema } from "effect"
import { AgentId, Wallet } from "./Ids.js"
import { Usdc } from "./Money.js"

const MINIMUM = 1_000_000n

/** An EIP-712 signature over one payout (docs/withdrawals.md): needed to pay an address other than the registered wallet. */
export const PayoutAuthorizationBody = Schema.Struct({
  nonce: Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{64}$/, { message: () => "must be 32 bytes as 0x + 64 hex characters" }))
    .annotations({ description: "32 random bytes chosen by the signer; each nonce pays once per agent" }),
  deadline: Schema.Int.pipe(Schema.positive()).annotations({ description: "Unix seconds; in the future and at most 330 seconds ahead" }),
  signature: Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{130}$/, { message: () => "must be a 65-byte signature as 0x + 130 hex characters" }))
}).annotations({ identifier: "PayoutAuthorization" })
export type PayoutAuthorizationBody = typeof PayoutAuthorizationBody.Type

export const WithdrawRequest = Schema.Struct({
  agentId: AgentId,
  amount: Usdc.pipe(Schema.filter((micros) => micros >= MINIMUM || "the minimum withdrawal is 1.000000 USDC")),
  destinationWallet: Schema.optional(Wallet).annotations({
    description: "Where the USDC goes; the agent's registered wallet by default. Another address needs `authorization`."
  }),
  authorization: Schema.optional(PayoutAuthorizationBody).annotations({
    description: "EIP-712 typed data `Withdrawal{agentId, amount, destination, nonce, deadline}` signed by the registered wallet (docs/withdrawals.md); with it the wallet-signature headers are not needed"
  })
}).annotations({ identifier: "WithdrawRequest" })

export const WithdrawAccepted = Schema.Struct({
  withdrawalId: Schema.String,
  agentId: Schema.String,
  amount: Schema.String,
  fee: Schema.String,
  netAmount: Schema.String,
  destinationWallet: Schema.String,
  status: Schema.Literal("pending"),
  message: Schema.String
}).annotations({ identifier: "WithdrawAccepted" })

export const Withdrawal = Schema.Struct({
  id: Schema.String,
  agent_id: Schema.String,
  amount: Schema.String,
  fee: Schema.String,
  net_amount: Schema.String,
  destination_wallet: Schema.String,
  status: Schema.Literal("pending", "processing", "completed", "failed"),
  tx_hash: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  completed_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Withdrawal" })

export const WithdrawalList = Schema.Struct({
  withdrawals: Schema.Array(Withdrawal),
  summary: Schema.Struct({ totalCount: Schema.Number, totalWithdrawn: Schema.String, pendingAmount: Schema.String })
}).annotations({ identifier: "WithdrawalList" })

/** limit (1-100, default 20) and offset of a list. */
export const PageQuery = Schema.Struct({
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))),
  offset: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(0, 1_000_000)))
})
