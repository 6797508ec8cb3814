// Metered calls (per-token, per-minute, dynamic): the columns a metered execution starts with, and, when its agent
// answered, the charge for what it used (src/domain/Pricing.ts) with the remainder moved out of the escrow: to
// remainders payable (paid back on chain in batches, services/remainders) or to the payer's credit. One transaction
// with the answer's record, before the machine steps (so every release, refund or dispute sees the charge).
import { SqlClient } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Effect } from "effect"
import type { Capability } from "../../src/domain/Agent.js"
import { chargeFor, type Meter, meterOf, unitsOfDuration } from "../../src/domain/Pricing.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { restoreStatement } from "../limits/statements.js"
import { clearUsageWarning, noteUsageMissing } from "../agents/usageWarning.js"
import { Outbox } from "../outbox/Outbox.js"
import { creditAccount, REMAINDERS_PAYABLE, RemaindersRepo } from "../remainders/Repo.js"
import type { CallOutcome } from "./AgentCall.js"

/** Where a payer wants its remainder: on chain (default) or kept as credit (`X-Remainder: credit`). */
/** Where a payer wants its remainder: on chain (default) or kept as credit (`X-Remainder: credit`); a channel's or an
 * upto authorization's unused maximum is simply never collected. */
export type RemainderTo = "chain" | "credit" | "channel" | "upto"

/** The largest usage report read (digits); a longer one counts as over any maximum. */
const MAX_USAGE_DIGITS = 30

/** Columns of a new execution of `capability` (none for flat pricing): its meter, and the quote accepted (dynamic). */
export const meteredColumns = (capability: Capability, quote: bigint | undefined, remainderTo: RemainderTo, price: bigint) => {
  const meter = meterOf(capability.pricing)
  if (meter.unit === "call") return {}
  return {
    authorized: price.toString(),
    meterUnit: meter.unit,
    unitPrice: meter.unitPrice.toString(),
    maxUnits: meter.maxUnits.toString(),
    quote: quote === undefined ? null : quote.toString(),
    remainderTo
  }
}

/**
 * The agent's usage report (`X-Usage-Units`, a non-negative integer): its units, "over" for a number too long to read,
 * or none (absent or malformed: no usage reported).
 */
export const parseUsage = (raw: string | undefined): bigint | "over" | undefined => {
  if (raw === undefined) return undefined
  const text = raw.trim()
  if (!/^[0-9]+$/.test(text)) return undefined
  return text.length > MAX_USAGE_DIGITS ? "over" : BigInt(text)
}

interface MeteredRow {
  readonly payer: string
  readonly paymentId: string
  readonly agentId: string
  readonly capabilityId: string
  readonly authorized: string | null
  readonly meterUnit: Meter["unit"] | null
  readonly unitPrice: string | null
  readonly maxUnits: string | null
  readonly quote: string | null
  readonly remainderTo: RemainderTo | null
  readonly unitsUsed: string | null
}

export class Metering extends Effect.Service<Metering>()("executions/Metering", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const remainders = yield* RemaindersRepo
    const outbox = yield* Outbox

    /**
     * Charges a metered execution whose agent answered, once (a second call finds `units_used` set and does nothing).
     * `settled`: its payment is on chain in this transaction; a credit needs that (a remainder owed on chain waits for
     * the settlement in the sender, and is voided if the payment never arrives).
     */
    const charge = (requestId: string, outcome: CallOutcome, settled: boolean) =>
      Effect.gen(function* () {
        if (!outcome.success || outcome.event.type !== "AGENT_SUCCEEDED") return
        const [row] = yield* sql<MeteredRow>`
          SELECT payer, payment_id, agent_id, capability_id, authorized::text, meter_unit, unit_price::text, max_units::text, quote::text, remainder_to, units_used::text
          FROM executions WHERE id = ${requestId} FOR UPDATE`
        if (row === undefined || row.authorized === null || row.meterUnit === null || row.unitsUsed !== null) return
        const meter: Meter = {
          unit: row.meterUnit,
          unitPrice: BigInt(row.unitPrice ?? "0"),
          perThousand: row.meterUnit === "token",
          maxUnits: BigInt(row.maxUnits ?? "0")
        }
        const authorized = BigInt(row.authorized)
        const quote = row.quote === null ? undefined : BigInt(row.quote)
        const reported = parseUsage(outcome.reportedUnits)
        // Agent time is measured by the service; tokens are reported; a dynamic call unreported costs its quote.
        const used = meter.unit === "second" || meter.unit === "minute"
          ? unitsOfDuration(meter, outcome.event.durationMs ?? 0)
          : reported === "over" ? meter.maxUnits + 1n
          : reported ?? (meter.unit === "micro-usdc" ? quote ?? meter.maxUnits : 0n)
        const c = chargeFor(meter, used, authorized, quote)
        // A per-token call without a usage report earned the agent nothing: its record says so, its owner hears it.
        if (meter.unit === "token" && reported === undefined) {
          const noted = yield* noteUsageMissing(sql, row.agentId, row.capabilityId, requestId)
          if (noted) yield* outbox.emitStatement("agent.usage_missing", row.agentId, { agentId: row.agentId, capabilityId: row.capabilityId, requestId, unitsCharged: "0" })
        } else if (meter.unit === "token") yield* clearUsageWarning(sql, row.agentId, row.capabilityId)
        // A channel's call: the unused maximum stays in the payer's channel (its charge is lowered when kept).
        // An upto call's unused maximum is never settled: it leaves the escrow back to settlement receivable.
        const remainderTo = row.remainderTo === "channel" || row.remainderTo === "upto" ? row.remainderTo : row.remainderTo === "credit" && settled ? "credit" : "chain"
        yield* sql`UPDATE executions SET ${sql.update({
          price: c.charged.toString(),
          agentFee: c.agentFee.toString(),
          platformCut: c.platformCut.toString(),
          agentEarnings: c.agentEarnings.toString(),
          unitsUsed: c.unitsUsed.toString(),
          usageCapped: c.capped,
          usageReported: reported === undefined ? null : reported === "over" ? null : reported.toString(),
          remainderTo
        })} WHERE id = ${requestId}`
        yield* sql`UPDATE escrows SET amount = ${c.charged.toString()} WHERE execution_id = ${requestId}`
        if (c.returned === 0n) return
        if (remainderTo === "credit") yield* ledger.openCreditAccount(creditAccount(row.payer), row.payer)
        else if (remainderTo === "chain") yield* remainders.create({ executionId: requestId, paymentId: row.paymentId, to: row.payer, amount: c.returned, source: "metered" })
        yield* ledger.transfer({
          kind: remainderTo === "credit" ? "remainder_credit" : remainderTo === "channel" ? "channel_remainder" : remainderTo === "upto" ? "upto_unused" : "remainder_owed",
          movements: [{
            debit: Accounts.escrow,
            credit: remainderTo === "credit" ? creditAccount(row.payer)
              : remainderTo === "channel" ? Accounts.channelReceivable
              : remainderTo === "upto" ? Accounts.settlementReceivable
              : REMAINDERS_PAYABLE,
            amount: c.returned
          }],
          paymentId: row.paymentId,
          agentId: row.agentId,
          subjectId: requestId
        }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
        // The payer's spending limits counted the maximum: what was not charged goes back to the day (services/limits).
        yield* restoreStatement(sql, { paymentId: row.paymentId, source: `metered:${requestId}`, amount: c.returned })
      }).pipe(withSpan("Metering.charge"))

    return { charge } as const
  }),
  dependencies: [Ledger.Default, RemaindersRepo.Default, Outbox.Default]
}) {}
