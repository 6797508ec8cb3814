// Opaque keyset cursors for operator lists: the last row's sort key, base64url JSON. A list goes on from the row after it,
// so rows added meanwhile neither shift nor repeat a page (unlike offsets).
import { Effect, Option, Schema } from "effect"
import { BadRequest } from "../../src/domain/Errors.js"

const Key = Schema.parseJson(Schema.Tuple(Schema.String, Schema.String))

export const encodeCursor = (first: string, second: string): string => Buffer.from(JSON.stringify([first, second]), "utf8").toString("base64url")

export const invalidCursor = () =>
  new BadRequest({
    code: "VALIDATION_ERROR",
    message: "cursor is not one this API handed out",
    details: { issues: [{ path: "cursor", message: "use the nextCursor of the previous page, unchanged" }] }
  })

/** The two parts of a cursor (none for the first page). */
export const decodeCursor = (cursor: string | undefined): Effect.Effect<Option.Option<readonly [string, string]>, BadRequest> =>
  cursor === undefined
    ? Effect.succeed(Option.none())
    : Schema.decodeUnknown(Key)(Buffer.from(cursor, "base64url").toString("utf8")).pipe(Effect.mapBoth({ onFailure: invalidCursor, onSuccess: Option.some }))

/** PostgreSQL's text form of a timestamptz (microseconds kept: a cursor must not round its row's time). */
const PG_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2})?$/

/** A (time, id) cursor; the time is PostgreSQL's own text of the row's timestamp, compared back as a timestamptz. */
export const decodeTimeCursor = (cursor: string | undefined) =>
  Effect.flatMap(decodeCursor(cursor), (key) =>
    Option.match(key, {
      onNone: () => Effect.succeed(Option.none<{ readonly at: string; readonly id: string }>()),
      onSome: ([at, id]) => (PG_TIME.test(at) ? Effect.succeed(Option.some({ at, id })) : Effect.fail(invalidCursor()))
    }))

/** Page of `limit` from `limit + 1` rows fetched: the rows, and the cursor of the last one when more follow. */
export const page = <A>(rows: ReadonlyArray<A>, limit: number, keyOf: (row: A) => readonly [string, string]) => {
  const items = rows.slice(0, limit)
  const last = items[items.length - 1]
  const hasMore = rows.length > limit && last !== undefined
  return { items, pagination: { limit, hasMore, nextCursor: hasMore ? encodeCursor(...keyOf(last)) : null } }
}
