// Handler of GET /discovery/resources: the x402 discovery catalogue, as the facilitator format (no envelope).
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { DiscoveryResources } from "../../services/discovery/Resources.js"
import { Api } from "./Api.js"

export const X402DiscoveryHttpLive = HttpApiBuilder.group(Api, "x402Discovery", (handlers) =>
  Effect.map(DiscoveryResources, (resources) => handlers.handle("resources", ({ urlParams }) => resources.list(urlParams))))
