// The console's dispute decision: a form on an open or escalated dispute's page (resolution, the client's share for a
// split, notes as the reason, a required confirmation), pulled through services/operator/Decisions.ts like the API's
// POST /api/v1/operator/disputes/:id/resolve (same schema, same record).
import { Effect, Either, Schema } from "effect"
import type { OperatorIdentity } from "../../services/operator/Actions.js"
import type { Decisions } from "../../services/operator/Decisions.js"
import { ResolveRequest } from "../domain/Dispute.js"
import { OperatorHeaders } from "../domain/Operator.js"
import { type Html, html } from "./html.js"
import type { LeverOutcome } from "./levers.js"

export const RESOLVE_DISPUTE = "resolve_dispute"

export interface DisputeForm {
  readonly target: string | undefined
  readonly operator: string | undefined
  readonly resolution: string | undefined
  readonly clientShareBps: string | undefined
  readonly notes: string | undefined
  readonly confirm: string | undefined
}

/** Offered while the dispute takes a decision (open or escalated). */
export const disputeLeverForm = (actor: { readonly kind: string; readonly id: string; readonly state: string }, csrf: string): Html | string =>
  actor.kind !== "dispute" || (actor.state !== "open" && actor.state !== "escalated")
    ? ""
    : html`<form class="lever" method="post" action="/ops/levers" data-lever="${RESOLVE_DISPUTE}" id="lever-${RESOLVE_DISPUTE}">
<strong>Resolve dispute ${actor.id}</strong><p class="muted">For the client: the whole price goes back to the payer on chain. For the agent: the frozen money is released. Split: the client's share (basis points) is refunded, the rest released.</p>
<input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="lever" value="${RESOLVE_DISPUTE}">
<input type="hidden" name="target" value="${actor.id}"><input type="hidden" name="kind" value="dispute"><input type="hidden" name="id" value="${actor.id}">
<label>Operator name <input type="text" name="operator" required maxlength="64" pattern="[A-Za-z0-9][A-Za-z0-9._@ \\-]{0,63}" autocomplete="username"></label>
<label>Resolution <select name="resolution" required><option value="resolved_client">for the client (refund)</option><option value="resolved_agent">for the agent (release)</option><option value="resolved_split">split</option></select></label>
<label>Client's share for a split (basis points, 1-9999) <input type="text" name="clientShareBps" inputmode="numeric" pattern="[0-9]{1,4}" placeholder="5000"></label>
<label>Notes (the reason) <input type="text" name="reason" required maxlength="1000"></label>
<label><input type="checkbox" name="confirm" value="yes" required> I confirm this decision</label>
<button type="submit">Resolve dispute</button></form>`

const refused = (code: string, message: string): LeverOutcome => ({ lever: RESOLVE_DISPUTE, outcome: "refused", code, message })
const decodeOperator = Schema.decodeUnknownEither(OperatorHeaders)
const decodeDecision = Schema.decodeUnknownEither(ResolveRequest)

export const pullDisputeLever = (decisions: Decisions, fingerprint: string, form: DisputeForm): Effect.Effect<LeverOutcome> =>
  Effect.gen(function* () {
    if (form.confirm !== "yes") return refused("CONFIRMATION_REQUIRED", "tick the confirmation box to resolve the dispute")
    const name = decodeOperator({ "x-operator": form.operator ?? "" })
    if (Either.isLeft(name)) return refused("VALIDATION_ERROR", "operator name: 1-64 letters, digits, spaces or . _ @ -")
    const notes = (form.notes ?? "").trim()
    if (notes === "") return refused("VALIDATION_ERROR", "notes (the reason) are required")
    const share = (form.clientShareBps ?? "").trim()
    const decision = decodeDecision({ resolution: form.resolution ?? "", notes, ...(share === "" || form.resolution !== "resolved_split" ? {} : { clientShareBps: Number(share) }) })
    if (Either.isLeft(decision)) return refused("VALIDATION_ERROR", "resolution: resolved_client, resolved_agent or resolved_split (client's share 1-9999 basis points)")
    const who: OperatorIdentity = { name: name.right["x-operator"], tokenFingerprint: fingerprint }
    const resolved = yield* Effect.either(decisions.resolveDispute(who, form.target ?? "", decision.right))
    return Either.match(resolved, {
      onLeft: (error) => refused(error.code, error.message),
      onRight: (dispute) => ({ lever: RESOLVE_DISPUTE, outcome: "applied" as const, code: RESOLVE_DISPUTE, message: `dispute ${dispute.id} ${dispute.status} by ${who.name}` })
    })
  })
