// Where a disputed execution's money goes: frozen into disputes held, then split between the payer, the platform and the
// agent by the resolution. Pure: amounts in, balanced movements out (the ledger checks the balance again).
import { Accounts, type Movement } from "../ledger/Ledger.js"

/** A paid execution's money: the price the payer paid, the platform's part (fee + cut) and the agent's earnings. */
export interface DisputedMoney {
  readonly agentId: string
  readonly price: bigint
  readonly platformPart: bigint
  readonly agentPart: bigint
}

/** Freezing held escrow: the whole price moves from the escrow. */
export const freezeHeld = (m: DisputedMoney): ReadonlyArray<Movement> => [{ debit: Accounts.escrow, credit: Accounts.disputesHeld, amount: m.price }]

/**
 * Freezing released money: the platform's part comes back from revenue and the agent's from its available balance, as
 * far as it reaches; what the agent already withdrew becomes its recorded debt (never a negative balance).
 */
export const freezeReleased = (m: DisputedMoney, available: bigint): { readonly movements: ReadonlyArray<Movement>; readonly debt: bigint } => {
  const covered = available <= 0n ? 0n : available < m.agentPart ? available : m.agentPart
  const debt = m.agentPart - covered
  return {
    debt,
    movements: [
      { debit: Accounts.agentAvailable(m.agentId), credit: Accounts.disputesHeld, amount: covered },
      { debit: Accounts.agentDebt(m.agentId), credit: Accounts.disputesHeld, amount: debt },
      { debit: Accounts.platformRevenue, credit: Accounts.disputesHeld, amount: m.platformPart }
    ]
  }
}

export interface Resolved {
  readonly movements: ReadonlyArray<Movement>
  readonly toClient: bigint
  readonly toPlatform: bigint
  /** Credited to the agent's available balance (after its debt from this dispute is repaid). */
  readonly toAgent: bigint
  readonly debtRepaid: bigint
}

/**
 * Where the client's share goes: refunds payable (a transfer to the payer's wallet) by default; for a channel-paid call,
 * back into the channel's receivable (taken off the unclaimed charge: the payer's channel balance keeps it) or, when the
 * payer's money left the channel before any claim, against that write-off (the payer has the money already).
 */
export const clientShareAccount = (refundTo: "channel" | "writtenOff" | undefined): string =>
  refundTo === "channel" ? Accounts.channelReceivable : refundTo === "writtenOff" ? Accounts.channelLosses : Accounts.refundsPayable

/**
 * The resolution: `clientShare` goes to `clientAccount` (refunds payable: sent on chain; see clientShareAccount); the rest is released as a normal release would
 * be, the platform and the agent each bearing the refund in proportion to their part of the price (the platform's kept
 * part rounded down). The agent's part first repays the debt this dispute recorded.
 */
export const resolve = (m: DisputedMoney, clientShare: bigint, debt: bigint, clientAccount: string = Accounts.refundsPayable): Resolved => {
  if (clientShare < 0n || clientShare > m.price) throw new RangeError(`client share ${clientShare} outside 0..${m.price}`)
  const remaining = m.price - clientShare
  const toPlatform = (m.platformPart * remaining) / m.price
  const agentKeeps = remaining - toPlatform
  const debtRepaid = debt < agentKeeps ? debt : agentKeeps
  const toAgent = agentKeeps - debtRepaid
  return {
    toClient: clientShare,
    toPlatform,
    toAgent,
    debtRepaid,
    movements: [
      { debit: Accounts.disputesHeld, credit: clientAccount, amount: clientShare },
      { debit: Accounts.disputesHeld, credit: Accounts.platformRevenue, amount: toPlatform },
      { debit: Accounts.disputesHeld, credit: Accounts.agentDebt(m.agentId), amount: debtRepaid },
      { debit: Accounts.disputesHeld, credit: Accounts.agentAvailable(m.agentId), amount: toAgent }
    ]
  }
}

/** A normal release when the agent owes a debt: its earnings repay the debt first. */
export const releaseWithDebt = (agentId: string, earnings: bigint, debt: bigint): ReadonlyArray<Movement> => {
  const repaid = debt <= 0n ? 0n : debt < earnings ? debt : earnings
  return [
    { debit: Accounts.escrow, credit: Accounts.agentDebt(agentId), amount: repaid },
    { debit: Accounts.escrow, credit: Accounts.agentAvailable(agentId), amount: earnings - repaid }
  ]
}

/** Basis points of the price, rounded down (a split's client share). */
export const shareOf = (price: bigint, bps: number): bigint => (price * BigInt(bps)) / 10_000n
