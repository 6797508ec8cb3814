// Named prepared statements for the statements the service repeats (issue 29): `@effect/sql-pg` sends every statement
// unnamed, so PostgreSQL parses and analyses it on every execution, the large one-statement batches of a paid call
// included. The pool's connections here name a statement once its text has been seen twice (one-off texts stay
// unnamed), up to a bound on distinct texts; pg then sends Parse once per connection and only Bind/Execute afterwards
// (still one round trip). Statements without parameters (BEGIN, COMMIT, migrations' scripts) keep the simple protocol.
// DATABASE_PREPARED_STATEMENTS=false turns it off (e.g. behind a pooler that does not keep prepared statements).
import { createHash } from "node:crypto"
import pg from "pg"

/** Distinct statement texts that get a name (per process; each connection prepares those it runs). */
const MAX_NAMED = 256

const seen = new Map<string, number>()
const names = new Map<string, string>()

/** The name for a statement text once it repeats; undefined while it is new or once the bound is reached. */
const nameFor = (text: string): string | undefined => {
  const named = names.get(text)
  if (named !== undefined) return named
  if (names.size >= MAX_NAMED) return undefined
  const count = (seen.get(text) ?? 0) + 1
  if (count < 2) {
    if (seen.size < 4 * MAX_NAMED) seen.set(text, count)
    return undefined
  }
  seen.delete(text)
  const name = `s${createHash("sha1").update(text).digest("base64url").slice(0, 20)}`
  names.set(text, name)
  return name
}

/** How many statement texts are named so far (for tests). */
export const namedStatements = () => names.size

/** A pg client that runs a repeated statement with parameters as a named prepared statement. */
export class PreparingClient extends pg.Client {}

const query = pg.Client.prototype.query as (this: pg.Client, ...args: Array<unknown>) => unknown
Object.defineProperty(PreparingClient.prototype, "query", {
  value: function(this: pg.Client, ...args: Array<unknown>) {
    const [config, values, callback] = args
    if (typeof config === "string" && Array.isArray(values) && values.length > 0) {
      const name = nameFor(config)
      if (name !== undefined) return query.call(this, { name, text: config, values }, callback)
    }
    return query.apply(this, args)
  }
})
