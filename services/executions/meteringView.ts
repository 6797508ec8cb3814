// A metered execution's usage and charge on the wire (the `metering` member of the client's view); pure.
import type { MeteringView } from "../../src/domain/Execution.js"
import { formatUsdc } from "../../src/domain/Money.js"
import type { ExecutionRow } from "./Repo.js"

export type MeteringRow = "price" | "authorized" | "meterUnit" | "unitPrice" | "unitsUsed" | "usageCapped" | "quote" | "remainderTo" | "remainderStatus" | "remainderTxHash"

/** `{metering}` for a metered execution, `{}` for flat pricing. Charged and returned are null until the agent answered. */
export const meteringView = (row: Pick<ExecutionRow, MeteringRow>): { readonly metering?: typeof MeteringView.Type } => {
  const { authorized, meterUnit, unitPrice } = row
  if (authorized == null || meterUnit == null || unitPrice == null) return {}
  const charged = row.unitsUsed == null ? null : row.price
  return {
    metering: {
      unit: meterUnit,
      unitsUsed: row.unitsUsed == null ? null : row.unitsUsed.toString(),
      unitPrice: formatUsdc(unitPrice),
      capped: row.usageCapped === true,
      authorized: formatUsdc(authorized),
      ...(row.quote == null ? {} : { quote: formatUsdc(row.quote) }),
      charged: charged === null ? null : formatUsdc(charged),
      returned: charged === null ? null : formatUsdc(authorized - charged),
      remainder: { to: row.remainderTo ?? "chain", status: row.remainderStatus ?? null, txHash: row.remainderTxHash ?? null }
    }
  }
}
