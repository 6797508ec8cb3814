// Handlers of /api/v1/disputes and /api/v1/operator/disputes.
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Disputes } from "../../services/disputes/Disputes.js"
import { toAgentList, toDispute, toEvidence, toOpened, toTimeline } from "../../services/disputes/View.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { tokenFingerprint } from "../../services/operator/Actions.js"
import { Decisions } from "../../services/operator/Decisions.js"
import { OperatorAuthLive, OperatorToken } from "./OperatorHttp.js"

export const DisputesHttpLive = HttpApiBuilder.group(Api, "disputes", (handlers) =>
  Effect.map(Disputes, (disputes) =>
    handlers
      .handle("open", ({ headers, payload }) => Effect.map(disputes.open(payload, headers["x-client-id"]), (d) => respond(toOpened(d))))
      .handle("byAgent", ({ path, urlParams }) => {
        const limit = urlParams.limit ?? 20
        const offset = urlParams.offset ?? 0
        return Effect.map(disputes.byAgent(path.agentId, urlParams.status, limit, offset), ({ rows, summary }) =>
          respond(toAgentList(rows, summary, limit, offset)))
      })
      .handle("get", ({ path }) => Effect.map(disputes.get(path.id), (d) => respond(toDispute(d, disputes.clientHandleOf(d)))))
      .handle("respond", ({ headers, path, payload }) => Effect.map(disputes.respond(path.id, payload.response, headers), respond))
      .handle("addEvidence", ({ headers, path, payload }) => Effect.map(disputes.addEvidence(path.id, payload, headers), respond))
      .handle("evidence", ({ path }) => Effect.map(disputes.evidence(path.id), (rows) => respond(toEvidence(path.id, rows))))
      .handle("timeline", ({ path }) => Effect.map(disputes.timeline(path.id), (rows) => respond(toTimeline(path.id, rows))))))

export const OperatorDisputesHttpLive = HttpApiBuilder.group(Api, "operatorDisputes", (handlers) =>
  Effect.gen(function* () {
    const disputes = yield* Disputes
    const decisions = yield* Decisions
    const fingerprint = tokenFingerprint(yield* OperatorToken)
    return handlers
      .handle("list", ({ urlParams }) => {
        const limit = urlParams.limit ?? 20
        const offset = urlParams.offset ?? 0
        return Effect.map(disputes.list(urlParams.status, limit, offset), ({ rows, total }) =>
          respond({ disputes: rows.map((d) => toDispute(d, disputes.clientHandleOf(d))), pagination: { total, limit, offset } }))
      })
      .handle("resolve", ({ path, headers, payload }) =>
        Effect.map(
          decisions.resolveDispute({ name: headers["x-operator"], tokenFingerprint: fingerprint }, path.id, payload),
          (d) => respond(toDispute(d, disputes.clientHandleOf(d)))
        ))
  })).pipe(Layer.provide(OperatorAuthLive))
