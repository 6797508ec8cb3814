// Handlers of /api/v1/discover: decode, call the Discovery service, wrap in the envelope.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Discovery } from "../../services/discovery/Discovery.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const DiscoveryHttpLive = HttpApiBuilder.group(Api, "discovery", (handlers) =>
  Effect.map(Discovery, (discovery) =>
    handlers
      .handle("discover", ({ urlParams }) => Effect.map(discovery.discover(urlParams), respond))
      .handle("tags", () => Effect.map(discovery.tags, respond))
      .handle("search", ({ urlParams }) => Effect.map(discovery.search(urlParams), respond))
      .handle("recommend", ({ urlParams }) => Effect.map(discovery.recommend(urlParams), respond))))
