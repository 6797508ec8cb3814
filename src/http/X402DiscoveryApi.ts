// GET /discovery/resources (free, no auth): the marketplace's paid resources in the x402 facilitator discovery list
// format (bazaar, x402 v2), so x402 discovery clients list our agents without knowing our API.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { PaymentRequirementsV2 } from "../../layers/x402/v2.js"

const Int = (min: number, max: number) => Schema.NumberFromString.pipe(Schema.int(), Schema.between(min, max))

export const DiscoveryResourcesQuery = Schema.Struct({
  type: Schema.optional(Schema.String.pipe(Schema.maxLength(50))),
  limit: Schema.optional(Int(1, 100)),
  offset: Schema.optional(Int(0, 1_000_000))
}).annotations({ parseOptions: { errors: "all" } })

export const DiscoveryResource = Schema.Struct({
  resource: Schema.String.annotations({ description: "POST here with the body the bazaar extension in metadata describes" }),
  type: Schema.Literal("http"),
  x402Version: Schema.Literal(2),
  accepts: Schema.Array(PaymentRequirementsV2),
  lastUpdated: Schema.String,
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}).annotations({ identifier: "DiscoveryResource" })

export const DiscoveryResourcesResponse = Schema.Struct({
  x402Version: Schema.Literal(2),
  items: Schema.Array(DiscoveryResource),
  pagination: Schema.Struct({ limit: Schema.Number, offset: Schema.Number, total: Schema.Number })
}).annotations({ identifier: "DiscoveryResourcesResponse" })

export class X402DiscoveryApi extends HttpApiGroup.make("x402Discovery").add(
  HttpApiEndpoint.get("resources", "/discovery/resources")
    .setUrlParams(DiscoveryResourcesQuery)
    .addSuccess(DiscoveryResourcesResponse)
    .annotate(OpenApi.Summary, "The active agents' capabilities as x402 discovery resources (facilitator list format, bazaar extension)")
    .annotate(
      OpenApi.Description,
      "Not in the usual envelope: the x402 facilitator `/discovery/resources` answer `{x402Version: 2, items, pagination}`. One item per capability of every active agent; `accepts` is what a call costs (price + 0.001 platform fee) in x402 v2 terms; `metadata.bazaar` is the bazaar extension (`info` + `schema`) saying how to call it. `type` other than `http` lists nothing."
    )
) {}
