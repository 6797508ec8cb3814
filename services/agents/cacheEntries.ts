// The agent cache's entries (pure, no I/O): a bounded map with lifetimes, and the rule that keeps a slow read from
// caching what a change already replaced. A reader takes a `mark` before it reads the database and offers what it read
// with that mark; the offer is refused when the entry was dropped after the mark (a change arrived while the read was
// in flight, so the read may predate it), or when that cannot be known any more (the drop was forgotten, or all was
// cleared).

export interface Entries<V> {
  readonly get: (id: string, now: number) => V | undefined
  /** The mark to read the database under. */
  readonly mark: () => number
  /** Keeps `value` (read under `since`) until `expiresAt`, unless a drop of `id` may have come after the read; false then. */
  readonly offer: (id: string, value: V, since: number, expiresAt: number) => boolean
  readonly drop: (id: string) => void
  readonly clear: () => void
  readonly size: () => number
}

export const makeEntries = <V>(maxEntries: number): Entries<V> => {
  const entries = new Map<string, { readonly value: V; readonly expiresAt: number }>()
  // The epoch of each id's latest drop (bounded: the oldest are forgotten, `forgottenUpTo` remembers how recent).
  const droppedAt = new Map<string, number>()
  let epoch = 0
  let forgottenUpTo = 0

  return {
    get: (id, now) => {
      const hit = entries.get(id)
      if (hit === undefined) return undefined
      if (hit.expiresAt <= now) {
        entries.delete(id)
        return undefined
      }
      return hit.value
    },
    mark: () => epoch,
    offer: (id, value, since, expiresAt) => {
      if (forgottenUpTo > since || (droppedAt.get(id) ?? 0) > since) return false
      if (!entries.has(id) && entries.size >= maxEntries) {
        const oldest = entries.keys().next()
        if (!oldest.done) entries.delete(oldest.value)
      }
      entries.set(id, { value, expiresAt })
      return true
    },
    drop: (id) => {
      epoch += 1
      entries.delete(id)
      droppedAt.delete(id)
      droppedAt.set(id, epoch)
      if (droppedAt.size > maxEntries) {
        const oldest = droppedAt.entries().next()
        if (!oldest.done) {
          droppedAt.delete(oldest.value[0])
          forgottenUpTo = oldest.value[1]
        }
      }
    },
    clear: () => {
      epoch += 1
      entries.clear()
      droppedAt.clear()
      forgottenUpTo = epoch
    },
    size: () => entries.size
  }
}
