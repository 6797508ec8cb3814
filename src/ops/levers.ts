// The console's levers: which ones an actor's page offers (by kind and state, per docs/operators.md), their confirmation
// forms, and pulling one through services/operator/Levers.ts (the API's levers: same events, same record).
import { Effect, Either, Schema } from "effect"
import type { OperatorIdentity } from "../../services/operator/Actions.js"
import type { Levers } from "../../services/operator/Levers.js"
import { AgentId } from "../domain/Ids.js"
import { LeverRequest, OperatorHeaders } from "../domain/Operator.js"
import { type Html, html } from "./html.js"

export const LEVERS = ["suspend_agent", "reinstate_agent", "refund_frozen", "retry_settlement", "retry_refund", "requeue_delivery", "force_circuit_open", "force_circuit_closed"] as const
export type LeverName = (typeof LEVERS)[number]

export interface LeverOffer {
  readonly lever: LeverName
  /** What the lever acts on: an agent id, a payment id, a refund id or a delivery id. */
  readonly target: string
  readonly title: string
  readonly effect: string
}

export interface ActorLike {
  readonly kind: string
  readonly id: string
  readonly state: string
  readonly summary: Readonly<Record<string, string | null>>
  readonly snapshot: unknown
}

const agentLevers = (agentId: string | null | undefined, status: string | null | undefined): ReadonlyArray<LeverOffer> =>
  agentId === null || agentId === undefined || status === null || status === undefined
    ? []
    : status === "suspended"
      ? [
        { lever: "reinstate_agent", target: agentId, title: `Reinstate agent ${agentId}`, effect: "Listed and callable again; releases refused while suspended are armed again." },
        {
          lever: "refund_frozen",
          target: agentId,
          title: `Refund the frozen money of agent ${agentId}`,
          effect: "Every escrow of this agent still held goes back to its payer on chain (the refund path); the agent never earns it, even if reinstated."
        }
      ]
      : [{ lever: "suspend_agent", target: agentId, title: `Suspend agent ${agentId}`, effect: "Out of discovery at once, calls answer AGENT_NOT_FOUND, its escrow is frozen until reinstatement." }]

const forcedOpen = (snapshot: unknown) =>
  typeof snapshot === "object" && snapshot !== null && "context" in snapshot &&
  typeof snapshot.context === "object" && snapshot.context !== null && "forced" in snapshot.context && snapshot.context.forced === true

/** The levers the actor's kind and state admit (the service still decides: a lever its state does not take is refused). */
export const leversFor = (actor: ActorLike): ReadonlyArray<LeverOffer> => {
  const s = actor.summary
  switch (actor.kind) {
    case "execution":
      return [
        ...(s["refundId"] && s["refundStatus"] === "pending"
          ? [{ lever: "retry_refund" as const, target: s["refundId"], title: `Retry refund ${s["refundId"]}`, effect: "Due now: the treasury worker sends it on its next pass; booked once, when mined." }]
          : []),
        ...agentLevers(s["agentId"], s["agentStatus"])
      ]
    case "settlement":
      return actor.state === "retrying"
        ? [{ lever: "retry_settlement", target: actor.id, title: `Retry settlement ${actor.id}`, effect: "Due now: the recovery worker settles it on its next pass (looks the authorization up on chain first)." }]
        : []
    case "circuit":
      return [
        ...(actor.state === "open" && forcedOpen(actor.snapshot)
          ? []
          : [{ lever: "force_circuit_open" as const, target: actor.id, title: "Force the circuit open", effect: "Calls are refused before payment (503 AGENT_UNAVAILABLE) until an operator closes it." }]),
        ...(actor.state === "open" || actor.state === "half-open"
          ? [{ lever: "force_circuit_closed" as const, target: actor.id, title: "Force the circuit closed", effect: "The shared circuit closes at once; calls go through again." }]
          : []),
        ...agentLevers(actor.id, s["agentStatus"])
      ]
    case "webhookDelivery":
      return actor.state === "dead"
        ? [{ lever: "requeue_delivery", target: actor.id, title: `Requeue dead letter of ${actor.id}`, effect: "A new delivery of the same event with the same body. No money." }]
        : []
    default:
      return []
  }
}

/** A lever's form: the operator's name, the reason and a required confirmation, posted with the session's CSRF token. */
export const leverForm = (offer: LeverOffer, back: { readonly kind: string; readonly id: string }, csrf: string): Html =>
  html`<form class="lever" method="post" action="/ops/levers" data-lever="${offer.lever}" id="lever-${offer.lever}">
<strong>${offer.title}</strong><p class="muted">${offer.effect}</p>
<input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="lever" value="${offer.lever}">
<input type="hidden" name="target" value="${offer.target}"><input type="hidden" name="kind" value="${back.kind}"><input type="hidden" name="id" value="${back.id}">
<label>Operator name <input type="text" name="operator" required maxlength="64" pattern="[A-Za-z0-9][A-Za-z0-9._@ \\-]{0,63}" autocomplete="username"></label>
<label>Reason <input type="text" name="reason" required maxlength="1000"></label>
<label><input type="checkbox" name="confirm" value="yes" required> I confirm: ${offer.title}</label>
<button type="submit">${offer.title}</button></form>`

export interface LeverForm {
  readonly lever: string | undefined
  readonly target: string | undefined
  readonly operator: string | undefined
  readonly reason: string | undefined
  readonly confirm: string | undefined
}

/** What pulling a lever came to, for the notice on the page the operator returns to. */
export interface LeverOutcome {
  readonly lever: string
  readonly outcome: "applied" | "refused"
  readonly code: string
  readonly message: string
}

const refused = (lever: string, code: string, message: string): LeverOutcome => ({ lever, outcome: "refused", code, message })
const decodeOperator = Schema.decodeUnknownEither(OperatorHeaders)
const decodeReason = Schema.decodeUnknownEither(LeverRequest)
const decodeAgent = Schema.decodeUnknownEither(AgentId)
const isLever = (name: string | undefined): name is LeverName => LEVERS.some((l) => l === name)

/** Validates the form as the API validates its request (same schemas), then pulls the lever through the service. */
export const pullLever = (levers: Levers, fingerprint: string, form: LeverForm): Effect.Effect<LeverOutcome> =>
  Effect.gen(function* () {
    const lever = form.lever
    if (!isLever(lever)) return refused(String(lever ?? ""), "VALIDATION_ERROR", "unknown lever")
    if (form.confirm !== "yes") return refused(lever, "CONFIRMATION_REQUIRED", "tick the confirmation box to pull a lever")
    const name = decodeOperator({ "x-operator": form.operator ?? "" })
    if (Either.isLeft(name)) return refused(lever, "VALIDATION_ERROR", "operator name: 1-64 letters, digits, spaces or . _ @ -")
    const body = decodeReason({ reason: form.reason ?? "" })
    if (Either.isLeft(body)) return refused(lever, "VALIDATION_ERROR", "a reason (1-1000 characters) is required")
    const who: OperatorIdentity = { name: name.right["x-operator"], tokenFingerprint: fingerprint }
    const reason = body.right.reason
    const target = form.target ?? ""
    const agent = () => {
      const id = decodeAgent(target)
      return Either.isRight(id) ? Effect.succeed(id.right) : Effect.fail({ code: "VALIDATION_ERROR", message: "not an agent id" })
    }
    const pulled = yield* Effect.either(
      lever === "suspend_agent" ? Effect.flatMap(agent(), (id) => levers.setAgentStatus(who, id, "suspended", reason))
        : lever === "reinstate_agent" ? Effect.flatMap(agent(), (id) => levers.setAgentStatus(who, id, "active", reason))
        : lever === "refund_frozen" ? Effect.flatMap(agent(), (id) => levers.refundFrozen(who, id, reason))
        : lever === "force_circuit_open" ? Effect.flatMap(agent(), (id) => levers.forceCircuit(who, id, "open", reason))
        : lever === "force_circuit_closed" ? Effect.flatMap(agent(), (id) => levers.forceCircuit(who, id, "closed", reason))
        : lever === "retry_settlement" ? levers.retrySettlement(who, target, reason)
        : lever === "retry_refund" ? levers.retryRefund(who, target, reason)
        : levers.requeueDelivery(who, target, reason)
    )
    return Either.match(pulled, {
      onLeft: (error) => refused(lever, error.code, error.message),
      onRight: (action) => ({
        lever,
        outcome: action.outcome,
        code: action.id,
        message: `${action.action} by ${action.operator}: ${action.from ?? "?"} → ${action.to ?? "unchanged"}`
      })
    })
  })
