// One structured log line for each transition that is a background action or a failure (a settlement retried or
// failed, a circuit opened, a delivery dead-lettered, a dispute escalated...), written by the host for every machine,
// with the actor's id, the event that moved it and its cause. Routine steps of a paid call are not logged.
import { Effect, LogLevel, Option } from "effect"
import type { Delivered, MachineKind } from "../../machines/Host.js"

/** The name of each kind's actor id in a log line. */
const ID_FIELD: Record<MachineKind, string> = {
  execution: "executionId",
  settlement: "paymentId",
  circuit: "agentId",
  treasury: "treasuryTxId",
  withdrawal: "withdrawalId",
  dispute: "disputeId",
  webhookDelivery: "deliveryId",
  chain: "chainId",
  channel: "channelId"
}

type Level = "info" | "warn" | "error"
const LEVELS: Record<Level, LogLevel.LogLevel> = { info: LogLevel.Info, warn: LogLevel.Warning, error: LogLevel.Error }

/**
 * The level of a transition worth a line, or none. `to` is the target state (`completed.held` for nested states),
 * `trigger` the event's type. Failures are warn (error when final and money or a delivery is lost for good).
 */
export const transitionLevel = (kind: MachineKind, from: string | null, to: string, trigger: string): Level | undefined => {
  switch (kind) {
    case "execution":
      if (trigger === "AGENT_FAILED" || trigger === "AGENT_DEADLINE") return "warn"
      if (trigger === "PAYMENT_FAILED") return "warn"
      // A confirmed refund is logged by services/refunds/Refunds.ts with its hash and amount.
      if (to === "refunding" || to === "returned") return "info"
      if (trigger === "DISPUTE_OPENED" || trigger === "DISPUTE_RESOLVED" || trigger === "REFUND_RETRY" || trigger === "OPERATOR_REFUND" || trigger === "AGENT_REINSTATED") return "info"
      return undefined
    case "settlement":
      if (to === "retrying") return "warn"
      // An upto authorization its failed call never used: nothing was lost.
      if (trigger === "UNUSED") return "info"
      if (to === "failed") return "error"
      if (trigger === "RETRY_DUE" || trigger === "RETRY_NOW") return "info"
      return undefined
    case "circuit":
      return to === "open" ? "warn" : from === to ? undefined : "info"
    // Sent, resent, replaced and dropped are logged by the treasury writer, with their hashes (services/treasury/txLog.ts).
    case "treasury":
      return to === "reverted" || trigger === "BROADCAST_FAILED" ? "warn" : undefined
    // A payout sent and paid is logged with its amount and hash by the treasury writer and services/withdrawals.
    case "withdrawal":
      if (to === "failed") return "error"
      return trigger === "DROPPED" ? "warn" : undefined
    case "dispute":
      return to === "escalated" ? "warn" : to.startsWith("resolved") ? "info" : undefined
    // The last failure (dead-lettered) is logged by the dead-letter action, with the subscription and the last status.
    case "webhookDelivery":
      return trigger === "ATTEMPT_FAILED" && to !== "dead" ? "warn" : undefined
    case "chain":
      return trigger === "TIMEOUT" ? "warn" : undefined
    // A failed claim or deposit, and the payer's withdrawal clock starting, are the operator's business.
    case "channel":
      if (to === "claimFailed" || to === "depositFailed") return "warn"
      if (to === "withdrawing" || to === "drained" || to === "closed" || trigger === "CLAIMED" || trigger === "SETTLED") return "info"
      return undefined
  }
}

/** Event fields that say why (error, reason, status) or what moved (hash, amount, who pulled a lever). */
const CAUSE_FIELDS: ReadonlyArray<readonly [eventField: string, logField: string]> = [
  ["error", "cause"],
  ["reason", "cause"],
  ["kind", "errorKind"],
  ["timedOut", "timedOut"],
  ["status", "lastStatus"],
  ["hash", "txHash"],
  ["txHash", "txHash"],
  ["txId", "treasuryTxId"],
  ["block", "block"],
  ["amount", "amountMicroUsdc"],
  ["clientShare", "clientShareMicroUsdc"],
  ["disputeId", "disputeId"],
  ["by", "operator"],
  ["success", "success"]
]

const fieldsOf = (event: Readonly<Record<string, unknown>>) => {
  const fields: Record<string, unknown> = {}
  for (const [from, to] of CAUSE_FIELDS) {
    const value = event[from]
    if (value !== undefined && value !== null && fields[to] === undefined) fields[to] = typeof value === "string" ? value.slice(0, 500) : value
  }
  return fields
}

/** Events that send an actor back to try again: named for the retry, not for the state it returns to. */
const RETRIES = new Set(["RETRY_DUE", "RETRY_NOW", "RETRY", "REFUND_RETRY"])

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null

/**
 * The line for one delivered event, if it is worth one. Logged when the step is taken, inside its transaction: a
 * transaction rolled back afterwards leaves a line for a step that did not happen (its history row is the truth).
 */
export const logTransition = (kind: MachineKind, id: string, event: unknown, delivered: Option.Option<Delivered>) => {
  if (Option.isNone(delivered) || !delivered.value.changed || !isRecord(event)) return Effect.void
  const { from, state } = delivered.value
  const trigger = typeof event["type"] === "string" ? event["type"] : "unknown"
  const level = transitionLevel(kind, from, state, trigger)
  if (level === undefined) return Effect.void
  const fields = fieldsOf(event)
  const cause = typeof fields["cause"] === "string" ? `: ${fields["cause"].slice(0, 200)}` : ""
  return Effect.logWithLevel(LEVELS[level], `${kind} ${id} ${from ?? "new"} -> ${state} (${trigger})${cause}`, {
    // The state reached, or what happened when the actor stays where it was (a failed attempt) or goes back (a retry).
    event: `${kind}.${from === state || RETRIES.has(trigger) ? trigger.toLowerCase().replace(/_(due|now)$/, "") : state.split(".")[0]}`,
    machine: kind,
    [ID_FIELD[kind]]: id,
    from,
    to: state,
    trigger,
    ...fields
  })
}
