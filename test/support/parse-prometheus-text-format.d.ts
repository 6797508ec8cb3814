// Types for parse-prometheus-text-format (it ships none): the prom2json-like shape it returns.
declare module "parse-prometheus-text-format" {
  export interface PrometheusSample {
    readonly labels?: Record<string, string>
    /** Counters, gauges, untyped. */
    readonly value?: string
    /** Histograms: cumulative count per upper bound ("+Inf" included), with count and sum. */
    readonly buckets?: Record<string, string>
    readonly count?: string
    readonly sum?: string
    readonly quantiles?: Record<string, string>
  }
  export interface PrometheusFamily {
    readonly name: string
    readonly help: string
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED"
    readonly metrics: ReadonlyArray<PrometheusSample>
  }
  export default function parsePrometheusTextFormat(text: string): Array<PrometheusFamily>
}
