// The pooled undici dispatcher for every outbound call (agents, callbacks); unless ALLOW_PRIVATE_URLS, each new socket's DNS answer is checked at connect time.
import { Effect } from "effect"
import type * as net from "node:net"
import { Agent } from "undici"
import { AppConfig } from "../Config.js"
import { firstRefused, hostNotAllowedMessage } from "../UrlGuard.js"
import { HostResolver, type ResolvedAddress } from "./HostResolver.js"
import { outboundSettings } from "./settings.js"

/** Refused by the connect-time lookup; never counted against the agent's breaker. */
export class BlockedAddressError extends Error {
  readonly code = "EBLOCKEDADDRESS"
  /** The message says only that the host is not allowed; `address` and `why` are for the log. */
  constructor(readonly hostname: string, readonly address: string, readonly why: string) {
    super(hostNotAllowedMessage(hostname))
  }
}

/**
 * A `net.connect` lookup over `resolve`, refusing the connection when any resolved address is private (unless allowed).
 * It runs for every new socket, so a name that resolved to a public address when it was checked and later rebinds to
 * 127.0.0.1 is still refused. (Literal IP hosts never reach a lookup: callers check those from the URL.)
 */
export const guardedLookup = (
  resolve: (hostname: string) => Promise<ReadonlyArray<ResolvedAddress>>,
  allowPrivateUrls: boolean
): net.LookupFunction =>
(hostname, options, callback) => {
  resolve(hostname).then(
    (all) => {
      const addresses = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all
      const bad = allowPrivateUrls ? undefined : firstRefused(addresses)
      if (bad !== undefined) return callback(new BlockedAddressError(hostname, bad.address, bad.why), "")
      const first = addresses[0]
      if (first === undefined) {
        return callback(Object.assign(new Error(`host ${hostname} has no addresses`), { code: "ENOTFOUND" }), "")
      }
      return options.all === true
        ? callback(null, addresses.map((a) => ({ address: a.address, family: a.family })))
        : callback(null, first.address, first.family)
    },
    (error: NodeJS.ErrnoException) => callback(error, "")
  )
}

export class OutboundPool extends Effect.Service<OutboundPool>()("OutboundPool", {
  scoped: Effect.gen(function* () {
    const { allowPrivateUrls } = yield* AppConfig
    const { executionTimeoutMs, responseMaxBytes } = yield* outboundSettings
    const resolver = yield* HostResolver
    const dispatcher = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Agent({
          // Per origin: each host gets its own pool of up to 128 keep-alive sockets.
          connections: 128,
          keepAliveTimeout: 10_000,
          keepAliveMaxTimeout: 60_000,
          // Defaults; every request passes its own deadline.
          headersTimeout: executionTimeoutMs,
          bodyTimeout: executionTimeoutMs,
          // Backstop for the streaming caps of the callers (undici 7 counts body bytes only, not content-length).
          maxResponseSize: responseMaxBytes,
          connect: { timeout: 10_000, lookup: guardedLookup(resolver.lookup, allowPrivateUrls) }
        })
      ),
      // Let in-flight exchanges end for up to 2 s, then cut them (a plain timer: the TestClock must not hold this up).
      (agent) =>
        Effect.promise(async () => {
          let timer: NodeJS.Timeout | undefined
          await Promise.race([agent.close(), new Promise<void>((resolve) => (timer = setTimeout(resolve, 2_000)))])
          clearTimeout(timer)
          await agent.destroy()
        })
    )
    return { dispatcher } as const
  }),
  dependencies: [HostResolver.Default]
}) {}
