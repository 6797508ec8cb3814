// A start-up failure of the embedded PostgreSQL with one clear message (printed without a stack trace).
export class EmbeddedPostgresError extends Error {
  override readonly name = "EmbeddedPostgresError"
}
