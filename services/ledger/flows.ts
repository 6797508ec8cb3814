// What a ledger transfer means for the money counters of /metrics: each movement classified by the accounts it joins.
import { moneyMoved } from "../../layers/observability/Metrics.js"
import { Accounts, type Movement } from "./Ledger.js"

export const MONEY_FLOWS = ["paid", "platform_fee", "platform_fee_returned", "refunded", "paid_out"] as const
export type MoneyFlow = (typeof MONEY_FLOWS)[number]

// Every flow's series exists from the start at 0, so an alert on a rate (refunds, payouts) has a series before the first
// movement of its kind (a counter born at its first increment hides that increment from rate()).
for (const flow of MONEY_FLOWS) moneyMoved.inc({ flow }, 0)

/** Every network's treasury: "treasury" (the primary's) and "treasury:<network>". */
const isTreasury = (account: string) => account === Accounts.treasury || account.startsWith(`${Accounts.treasury}:`)

/** The flows of one movement (a registration fee is both paid and a platform fee). */
export const flowsOf = (m: Movement): ReadonlyArray<MoneyFlow> => {
  const flows: Array<MoneyFlow> = []
  // Into the treasury from a payer (a settled payment or registration fee); the opening balance is not a payment.
  if (isTreasury(m.debit) && !m.credit.startsWith("treasury_opening")) flows.push("paid")
  if (m.credit === Accounts.platformRevenue) flows.push("platform_fee")
  if (m.debit === Accounts.platformRevenue) flows.push("platform_fee_returned")
  // Refunds, and the unused part of metered payments paid back (remainders payable, services/remainders).
  if (isTreasury(m.credit) && (m.debit === Accounts.refundsPayable || m.debit === "remainders_payable")) flows.push("refunded")
  if (isTreasury(m.credit) && m.debit === Accounts.withdrawalsPayable) flows.push("paid_out")
  return flows
}

/**
 * Counts a transfer when its statements are built, inside the transaction that books it: a transaction rolled back
 * afterwards leaves its count (rare; the ledger is the truth, the counters are for rates and alerts).
 */
export const countFlows = (movements: ReadonlyArray<Movement>) => {
  for (const m of movements) {
    for (const flow of flowsOf(m)) moneyMoved.inc({ flow }, Number(m.amount))
  }
}
