// Types of the data the console's pages render: what the operator services return.
import type { Effect, Option } from "effect"
import type { Inspection } from "../../../services/operator/Inspection.js"
import type { OperatorStats } from "../../../services/operator/Stats.js"

export type Success<F> = F extends (...args: never) => Effect.Effect<infer A, infer _E, infer _R> ? A : never
export type Counts = Success<Inspection["counts"]>
export type ActorList = Success<Inspection["list"]>
export type Actor = Success<Inspection["actor"]> extends Option.Option<infer A> ? A : never
export type History = Success<Inspection["history"]> extends Option.Option<infer A> ? A : never
export type Stats = Success<OperatorStats["stats"]>

export interface Notice {
  readonly ok: boolean
  readonly text: string
}
