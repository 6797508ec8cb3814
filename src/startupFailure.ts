// A service that cannot start says why in one message (what failed, the underlying reason, what to do), never a stack trace.
import { Cause, ConfigError, Option } from "effect"

/** The innermost messages of an error and its `cause` chain, bounded (a chain from outside can be long). */
const reasons = (error: unknown): ReadonlyArray<string> => {
  const out: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    const message = current instanceof Error ? current.message : typeof current === "object" && "message" in current ? String(current.message) : String(current)
    if (message !== "" && message !== "An error has occurred" && !out.some((m) => m.includes(message))) out.push(message.split("\n")[0]!.slice(0, 400))
    current = typeof current === "object" && "cause" in current ? current.cause : undefined
  }
  return out
}

const codeOf = (error: unknown): string | undefined => {
  let current: unknown = error
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth++) {
    if ("code" in current && typeof current.code === "string") return current.code
    current = "cause" in current ? current.cause : undefined
  }
  return undefined
}

const hints: Record<string, (port: string) => string> = {
  EADDRINUSE: (port) => `port ${port} is already in use: stop the other process or choose another PORT`,
  EACCES: (port) => `not allowed to listen on port ${port}: choose a PORT above 1023 or run with the right privileges`
}

/** Each leaf of a configuration error as "NAME: message" (or the message alone when it names no setting). */
const configMessages = (error: ConfigError.ConfigError): ReadonlyArray<string> => {
  switch (error._op) {
    case "And":
    case "Or":
      return [...configMessages(error.left), ...configMessages(error.right)]
    default: {
      const name = error.path.join("_")
      return [name === "" || error.message.includes(name) ? error.message : `${name}: ${error.message}`]
    }
  }
}

/** One paragraph for the operator. `port` is the configured PORT (for the listen errors). */
export const describeStartupFailure = (cause: Cause.Cause<unknown>, port: string): string => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause)) ?? Cause.squash(cause)
  if (ConfigError.isConfigError(failure)) return `configuration: ${[...new Set(configMessages(failure))].join("; ")}`
  const tag = typeof failure === "object" && failure !== null && "_tag" in failure ? String(failure._tag) : undefined
  if (tag === "ServeError") {
    const code = codeOf(failure)
    const hint = code === undefined ? undefined : hints[code]
    return hint !== undefined ? hint(port) : `the HTTP server could not listen: ${reasons(failure).join(": ")}`
  }
  // Our own one-line refusal, whole (it names the directories and hashes the operator needs).
  if (tag === "ChainIdentityError" && typeof failure === "object" && failure !== null && "message" in failure) return String(failure.message)
  if (tag === "SqlError") return `the database (DATABASE_URL) is not usable: ${reasons(failure).join(": ")}`
  return reasons(failure).join(": ")
}
