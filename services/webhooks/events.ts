// The events a subscription may name (spec section 6) and how a subscription's list matches an event.

export const WEBHOOK_EVENTS = [
  "execution.completed",
  "execution.failed",
  "payment.received",
  "escrow.released",
  "escrow.disputed",
  "dispute.opened",
  "dispute.resolved",
  "withdrawal.completed",
  "withdrawal.failed",
  "chain.started",
  "chain.child_spawned",
  "chain.completed",
  "chain.partial_failure",
  "chain.budget_warning",
  "chain.depth_limit",
  "agent.usage_missing"
] as const
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number]

/** What a subscription may list: an event, `*` (all) or `chain.*` (all chain events). */
export const SUBSCRIBABLE: ReadonlyArray<string> = ["*", "chain.*", ...WEBHOOK_EVENTS]

/** The entries that are not subscribable (empty when the list is valid). */
export const unknownEvents = (events: ReadonlyArray<string>) => events.filter((e) => !SUBSCRIBABLE.includes(e))

/** Does a subscription to `events` receive `event`? */
export const matches = (events: ReadonlyArray<string>, event: string) =>
  events.some((e) => e === "*" || e === event || (e === "chain.*" && event.startsWith("chain.")))
