// Recognising PostgreSQL errors behind an SqlError, for the few we answer rather than treat as faults; the rest as defects.
import { Effect } from "effect"

/** True when `error` is a unique violation (23505) of `constraint`. */
export const isUniqueViolation = (error: unknown, constraint: string): boolean => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
  return typeof cause === "object" && cause !== null && "code" in cause && cause.code === "23505" &&
    "constraint" in cause && cause.constraint === constraint
}

/** Database failures are bugs or outages, not answers: they surface as 500s (and are logged). */
export const sqlErrorsAsDefects = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, { readonly _tag: "SqlError" }> =>
      typeof error === "object" && error !== null && "_tag" in error && error._tag === "SqlError",
    Effect.die
  )
