// GET /metrics: Prometheus text. Per-process counters and histograms (labelled with the instance); cluster-wide gauges
// (read from the database at scrape time, the gas watch's) only from the instance holding their lease.
// Open on devnet unless METRICS_TOKEN is set; against a real chain it always needs `Authorization: Bearer <METRICS_TOKEN>`.
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Config, Effect, Option, Redacted } from "effect"
import { timingSafeEqual } from "node:crypto"
import { AppConfig, type ChainMode } from "../../layers/Config.js"
import { Leases } from "../../layers/cluster/Leases.js"
import { CLUSTER_GAUGES_LEASE, makeDbGauges } from "../../layers/observability/dbGauges.js"
import { clusterRegistry, enableProcessMetrics, labelProcessMetrics, processRegistry } from "../../layers/observability/Metrics.js"
import { Unauthorized } from "../domain/Errors.js"

export const METRICS_PATH = "/metrics"

const metricsToken = Config.option(
  Config.redacted(
    Config.string("METRICS_TOKEN").pipe(
      Config.validate({ message: "METRICS_TOKEN must be at least 16 characters", validation: (s) => s.length >= 16 })
    )
  )
)

const sameSecret = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

const BEARER = /^Bearer\s+(\S+)\s*$/i

/** Who may scrape: anyone on devnet without METRICS_TOKEN; otherwise only `Authorization: Bearer <METRICS_TOKEN>`. */
export const metricsAccess = (chainMode: ChainMode, token: Option.Option<Redacted.Redacted<string>>) =>
(authorization: string | undefined): boolean => {
  if (chainMode === "devnet" && Option.isNone(token)) return true
  const presented = authorization === undefined ? undefined : BEARER.exec(authorization)?.[1]
  return Option.isSome(token) && presented !== undefined && sameSecret(presented, Redacted.value(token.value))
}

/** The scrape route, beside the API (not in the OpenAPI document: it is not JSON). */
export const MetricsRouteLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function* () {
    const { chainMode } = yield* AppConfig
    const token = yield* metricsToken
    const leases = yield* Leases
    const gauges = yield* makeDbGauges(leases.instance)
    labelProcessMetrics(leases.instance)
    enableProcessMetrics()
    // The database gauges are the same whoever reads them: one instance of the cluster reads and exports them.
    const { held } = yield* leases.keep(CLUSTER_GAUGES_LEASE, { onGain: gauges.exporting(true), onLose: gauges.exporting(false), realTime: true })
    const refused = new Unauthorized({
      code: "METRICS_AUTH_REQUIRED",
      message: Option.isSome(token)
        ? "GET /metrics needs Authorization: Bearer <METRICS_TOKEN>"
        : "GET /metrics needs Authorization: Bearer <METRICS_TOKEN>; set METRICS_TOKEN to enable it"
    })
    const authorized = metricsAccess(chainMode, token)
    yield* router.get(
      METRICS_PATH,
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        if (!authorized(request.headers["authorization"])) return yield* refused
        const cluster = yield* held
        if (cluster) yield* gauges.refresh
        const text = yield* Effect.promise(async () =>
          [await processRegistry.metrics(), await gauges.local.metrics(), await clusterRegistry.metrics(), cluster ? await gauges.registry.metrics() : ""].join("\n"))
        return HttpServerResponse.text(text, { contentType: processRegistry.contentType, headers: { "cache-control": "no-store" } })
      })
    )
  })
)
