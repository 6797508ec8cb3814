// WEB_CONCURRENCY: how many server processes serve the port (1: this process alone, as always; 2..16: a primary and workers).
import { Config } from "effect"

export const MAX_WEB_CONCURRENCY = 16

/** A whole number from 1 to 16, default 1; anything else is one clear configuration error at start. */
export const webConcurrency = Config.string("WEB_CONCURRENCY").pipe(
  Config.withDefault("1"),
  Config.validate({
    message: `WEB_CONCURRENCY must be a whole number from 1 to ${MAX_WEB_CONCURRENCY} (server processes on this machine; about one per core)`,
    validation: (s) => /^\s*\d{1,2}\s*$/.test(s) && Number(s) >= 1 && Number(s) <= MAX_WEB_CONCURRENCY
  }),
  Config.map(Number)
)
