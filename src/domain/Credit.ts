// A payer's credit at the marketplace (metered calls' remainders kept with `X-Remainder: credit`): its view and withdrawal.
import { Schema } from "effect"
import { Usdc } from "./Money.js"

export const CreditView = Schema.Struct({
  wallet: Schema.String,
  /** USDC. */
  credit: Schema.String
}).annotations({ identifier: "PayerCredit" })

export const WithdrawCreditRequest = Schema.Struct({
  /** USDC; absent: the whole credit. Signed as micro-USDC (0 when absent). */
  amount: Schema.optionalWith(Usdc, { exact: true })
}).annotations({ identifier: "WithdrawCreditRequest" })

export const CreditWithdrawal = Schema.Struct({
  wallet: Schema.String,
  withdrawn: Schema.String,
  /** What is left. */
  credit: Schema.String,
  /** The withdrawal goes out on chain in the next remainder batch. */
  status: Schema.Literal("pending")
}).annotations({ identifier: "CreditWithdrawal" })
