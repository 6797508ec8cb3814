// Handlers of /api/v1/operator/channels (thin: decode, call services/operator/Channels.ts, encode).
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { OperatorChannels } from "../../services/operator/Channels.js"
import { NotFound } from "../domain/Errors.js"
import { OPERATOR_PAGE_DEFAULT } from "../domain/Operator.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { OperatorAuthLive } from "./OperatorHttp.js"

export const OperatorChannelsHttpLive = HttpApiBuilder.group(Api, "operatorChannels", (handlers) =>
  Effect.gen(function* () {
    const channels = yield* OperatorChannels
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.map(
          channels.list({ limit: urlParams.limit ?? OPERATOR_PAGE_DEFAULT, cursor: urlParams.cursor, status: urlParams.status, payer: urlParams.payer }),
          respond
        ))
      .handle("get", ({ path }) =>
        Effect.flatMap(channels.detail(path.id), Option.match({
          onNone: () => Effect.fail(new NotFound({ code: "CHANNEL_NOT_FOUND", message: `no channel ${path.id}` })),
          onSome: (detail) => Effect.succeed(respond(detail))
        })))
  })).pipe(Layer.provide(OperatorAuthLive))
