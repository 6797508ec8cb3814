// Wire schemas of the operator's view of batch-settlement channels (GET /api/v1/operator/channels[/{id}]). Amounts are
// micro-USDC integer strings, as the contract and the vouchers count them.
import { Schema } from "effect"
import { ChannelStatus } from "../../services/channels/Repo.js"
import { Wallet } from "./Ids.js"
import { Pagination, PageQuery } from "./Operator.js"

const Micro = Schema.String.annotations({ description: "micro-USDC (integer)" })

export const ChannelId = Schema.Lowercase.pipe(
  Schema.compose(Schema.String.pipe(Schema.pattern(/^0x[0-9a-f]{64}$/, { message: () => "must be a channel id: 0x followed by 64 hex characters" })))
).annotations({ identifier: "ChannelId" })

export const ChannelPath = Schema.Struct({ id: ChannelId })

export const ChannelListQuery = Schema.extend(
  PageQuery,
  Schema.Struct({
    status: Schema.optional(ChannelStatus).annotations({ description: "only channels in this state" }),
    payer: Schema.optional(Wallet).annotations({ description: "only this payer's channels" })
  })
)

export const OperatorChannel = Schema.Struct({
  id: Schema.String,
  network: Schema.String,
  status: ChannelStatus,
  payer: Schema.String,
  payerAuthorizer: Schema.String,
  receiver: Schema.String,
  token: Schema.String,
  withdrawDelaySeconds: Schema.Number,
  /** The on-chain balance as last mirrored. */
  balance: Micro,
  chargedCumulative: Micro,
  claimedCumulative: Micro,
  settledCumulative: Micro,
  /** Charged and not claimed yet: lost if the payer's withdrawal finalizes first. */
  unclaimed: Micro,
  voucherMaxClaimable: Schema.NullOr(Micro),
  withdrawRequestedAt: Schema.NullOr(Schema.String),
  finalizableAt: Schema.NullOr(Schema.String),
  claims: Schema.Number,
  lastError: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
}).annotations({ identifier: "OperatorChannel" })

export const OperatorChannelList = Schema.Struct({
  items: Schema.Array(OperatorChannel),
  pagination: Pagination
}).annotations({ identifier: "OperatorChannelList" })

export const OperatorChannelCharge = Schema.Struct({
  requestId: Schema.String,
  amount: Micro,
  cumulativeAfter: Micro,
  voucherMaxClaimable: Micro,
  status: Schema.Literal("charged", "returned", "claimed"),
  createdAt: Schema.String,
  returnedAt: Schema.NullOr(Schema.String)
}).annotations({ identifier: "OperatorChannelCharge" })

export const OperatorChannelDetail = Schema.Struct({
  channel: OperatorChannel,
  charges: Schema.Struct({
    /** Every charge counted by status. */
    counts: Schema.Struct({ charged: Schema.Number, returned: Schema.Number, claimed: Schema.Number }),
    /** The newest charges first (at most 100). */
    latest: Schema.Array(OperatorChannelCharge)
  }),
  /** The contract's state now (latest block); null when the chain did not answer (`onChainError` says why). */
  onChain: Schema.NullOr(Schema.Struct({
    block: Schema.String,
    balance: Micro,
    totalClaimed: Micro,
    refundNonce: Schema.String,
    pendingWithdrawal: Schema.NullOr(Schema.Struct({ amount: Micro, initiatedAt: Schema.String, finalizableAt: Schema.String }))
  })),
  onChainError: Schema.NullOr(Schema.String)
}).annotations({ identifier: "OperatorChannelDetail" })
