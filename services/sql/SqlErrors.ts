// Recognising PostgreSQL errors behind an SqlError, for the few we answer rather than treat as faults.

/** True when `error` is a unique violation (23505) of `constraint`. */
export const isUniqueViolation = (error: unknown, constraint: string): boolean => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
  return typeof cause === "object" && cause !== null && "code" in cause && cause.code === "23505" &&
    "constraint" in cause && cause.constraint === constraint
}
