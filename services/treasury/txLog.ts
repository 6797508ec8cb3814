// The log lines of the treasury's transactions: sent, resent after their lease, dropped (a replacement is logged by
// replace.ts, a failed broadcast or a revert by the machine host: layers/observability/machineLog.ts).
import { Effect, LogLevel } from "effect"
import type { TreasuryTxRow } from "./Repo.js"

/** A new transaction went out (or its first broadcast failed: the worker sends it again after its lease). */
export const sent = (
  intent: { readonly purpose: string; readonly subjectId: string; readonly logFields?: Readonly<Record<string, string | bigint | null>> },
  stored: { readonly id: string; readonly txHash: string; readonly nonce: bigint },
  broadcast: boolean
) =>
  // A single settlement is part of a paid call (its request line says so); every other send is background work.
  Effect.logWithLevel(
    intent.purpose === "settlement" ? LogLevel.Debug : broadcast ? LogLevel.Info : LogLevel.Warning,
    `treasury ${intent.purpose} ${intent.subjectId} ${broadcast ? "sent" : "signed, broadcast failed"}: ${stored.txHash}`,
    {
      event: broadcast ? "treasury.sent" : "treasury.send_failed",
      purpose: intent.purpose,
      subjectId: intent.subjectId,
      treasuryTxId: stored.id,
      txHash: stored.txHash,
      nonce: stored.nonce,
      ...intent.logFields
    }
  )

/** Not mined by the end of its lease: the same bytes sent again. */
export const resent = (tx: TreasuryTxRow) =>
  Effect.logInfo(`treasury tx ${tx.id} resent: ${tx.txHash}`, {
    event: "treasury.resent",
    treasuryTxId: tx.id,
    purpose: tx.purpose,
    subjectId: tx.subjectId,
    nonce: tx.nonce,
    txHash: tx.txHash
  })

/** Its nonce went to another transaction: these bytes (and those they replaced) can never be mined. */
export const dropped = (tx: TreasuryTxRow) =>
  Effect.logWarning(`treasury tx ${tx.id} dropped: nonce ${tx.nonce} was used by another transaction`, {
    event: "treasury.dropped",
    treasuryTxId: tx.id,
    purpose: tx.purpose,
    subjectId: tx.subjectId,
    nonce: tx.nonce,
    txHash: tx.txHash,
    replacedHashes: tx.replacedHashes.join(","),
    cause: "nonce used by another transaction"
  })
