// /api/v1/operator/channels: batch-settlement channels for operators (their rows, charges and on-chain state), behind
// the operator bearer token like every operator route.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { ChannelListQuery, ChannelPath, OperatorChannelDetail, OperatorChannelList } from "../domain/Channels.js"
import { ok } from "./Envelope.js"
import { OperatorAuth } from "./OperatorApi.js"

export class OperatorChannelsApi extends HttpApiGroup.make("operatorChannels")
  .add(
    HttpApiEndpoint.get("list", "/")
      .setUrlParams(ChannelListQuery)
      .addSuccess(ok(OperatorChannelList))
      .annotate(OpenApi.Summary, "Batch-settlement channels, newest first (filter: status, payer; keyset pages: limit, cursor); amounts in micro-USDC")
  )
  .add(
    HttpApiEndpoint.get("get", "/:id")
      .setPath(ChannelPath)
      .addSuccess(ok(OperatorChannelDetail))
      .annotate(OpenApi.Summary, "One channel: its row, its charges (counts and the newest 100) and the contract's state now (404 CHANNEL_NOT_FOUND)")
  )
  .middleware(OperatorAuth)
  .prefix("/api/v1/operator/channels") {}
