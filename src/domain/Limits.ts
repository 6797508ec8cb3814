// A payer wallet's spending limits on the wire (docs/clients.md, Spending limits): amounts as USDC decimal strings.
import { Schema } from "effect"
import { AgentId } from "./Ids.js"
import { Usdc } from "./Money.js"

const Positive = Usdc.pipe(Schema.filter((micros) => micros > 0n || "a limit must be more than 0 (leave it out for none)"))

export const PayerPath = Schema.Struct({
  wallet: Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{40}$/, { message: () => "must be a 0x wallet address" }))
})

export const PayerSignatureHeaders = Schema.Struct({
  "x-payer-signature": Schema.optional(Schema.String),
  "x-payer-signed-at": Schema.optional(Schema.String)
})

/** PUT body: every limit optional, at least one present; what is left out is no limit. */
export const SetLimitsRequest = Schema.Struct(
  {
    perCallMax: Schema.optionalWith(Positive, { exact: true }),
    perDayMax: Schema.optionalWith(Positive, { exact: true }),
    perAgentPerDayMax: Schema.optionalWith(Positive, { exact: true }),
    allowedAgents: Schema.optionalWith(Schema.Array(AgentId).pipe(Schema.minItems(1), Schema.maxItems(100)), { exact: true })
  }
).annotations({ parseOptions: { errors: "all" } }).pipe(
  Schema.filter((b) =>
    b.perCallMax !== undefined || b.perDayMax !== undefined || b.perAgentPerDayMax !== undefined || b.allowedAgents !== undefined ||
    "give at least one limit (DELETE removes them)")
)
export type SetLimitsRequest = typeof SetLimitsRequest.Type

export const LimitsView = Schema.Struct({
  wallet: Schema.String,
  perCallMax: Schema.NullOr(Schema.String),
  perDayMax: Schema.NullOr(Schema.String),
  perAgentPerDayMax: Schema.NullOr(Schema.String),
  allowedAgents: Schema.NullOr(Schema.Array(Schema.String)),
  /** The current UTC day and what was counted against the limits in it (refunded calls given back). */
  day: Schema.String,
  spentToday: Schema.String,
  spentTodayByAgent: Schema.Record({ key: Schema.String, value: Schema.String }),
  /** The X-Payer-Signed-At of the last change: the next change must be signed later. */
  signedAt: Schema.Number
})
export type LimitsView = typeof LimitsView.Type

export const LimitsRemoved = Schema.Struct({ wallet: Schema.String, removed: Schema.Literal(true), signedAt: Schema.Number })
