// How often dead workers are replaced before the primary gives up: a crash loop stops the service instead of spinning.

export interface RestartBudget {
  /** Records a worker's exit at `now` (ms); true when a replacement may start, false when the budget is spent. */
  readonly allow: (now: number) => boolean
  /** Exits recorded in the window ending at the last call. */
  readonly recent: () => number
}

/** At most `max` replacements within any `windowMs`: the (max + 1)th exit inside one window spends the budget. */
export const restartBudget = (max: number, windowMs: number): RestartBudget => {
  let exits: Array<number> = []
  return {
    allow: (now) => {
      exits = [...exits.filter((t) => now - t < windowMs), now]
      return exits.length <= max
    },
    recent: () => exits.length
  }
}
