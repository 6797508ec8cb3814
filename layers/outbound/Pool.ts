// The pooled undici dispatcher for outbound calls; unless ALLOW_PRIVATE_URLS, every new socket's DNS answer is checked at connect time.
import { Effect } from "effect"
import * as dns from "node:dns"
import type * as net from "node:net"
import { Agent } from "undici"
import { firstRefused, privateAddressMessage } from "../UrlGuard.js"

/** Refused by the connect-time lookup; never counted against the agent's breaker. */
export class BlockedAddressError extends Error {
  readonly code = "EBLOCKEDADDRESS"
  constructor(readonly hostname: string, readonly address: string, why: string) {
    super(privateAddressMessage(hostname, address, why))
  }
}

/**
 * dns.lookup, refusing the connection when any resolved address is private. It runs for every new socket, so a
 * name that resolved to a public address at registration and later rebinds to 127.0.0.1 is still refused.
 */
const guardedLookup: net.LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error !== null) return callback(error, "")
    const bad = firstRefused(addresses)
    if (bad !== undefined) return callback(new BlockedAddressError(hostname, bad.address, bad.why), "")
    const first = addresses[0]
    if (first === undefined) {
      return callback(Object.assign(new Error(`host ${hostname} has no addresses`), { code: "ENOTFOUND" }), "")
    }
    return options.all === true ? callback(null, addresses) : callback(null, first.address, first.family)
  })
}

/** One undici Agent for the scope; closing the scope lets in-flight exchanges end for up to 2 s, then cuts them. */
export const makeGuardedDispatcher = (options: {
  readonly allowPrivateUrls: boolean
  readonly timeoutMs: number
  readonly maxResponseBytes: number
}) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      new Agent({
        // Per origin: each agent host gets its own pool of up to 128 keep-alive sockets.
        connections: 128,
        keepAliveTimeout: 10_000,
        keepAliveMaxTimeout: 60_000,
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
        // Backstop for the streaming cap in readCapped (undici 7 counts body bytes only, not content-length).
        maxResponseSize: options.maxResponseBytes,
        connect: options.allowPrivateUrls ? { timeout: 10_000 } : { timeout: 10_000, lookup: guardedLookup }
      })
    ),
    // A plain timer: the TestClock must not hold this up.
    (agent) =>
      Effect.promise(async () => {
        let timer: NodeJS.Timeout | undefined
        await Promise.race([agent.close(), new Promise<void>((resolve) => (timer = setTimeout(resolve, 2_000)))])
        clearTimeout(timer)
        await agent.destroy()
      })
  )
