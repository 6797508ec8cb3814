// Outbound URL policy: agent and webhook URLs may not reach loopback or private networks unless ALLOW_PRIVATE_URLS, checked after DNS resolution.
import { Data, Effect } from "effect"
import * as dns from "node:dns/promises"
import * as net from "node:net"
import { AppConfig } from "./Config.js"

const blocked = new net.BlockList()
for (const [address, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4]
] as const) blocked.addSubnet(address, prefix, "ipv4")
for (const [address, prefix] of [
  ["::", 96],
  ["::1", 128],
  ["64:ff9b::", 96],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  ["2001::", 32],
  ["2001:db8::", 32],
  ["2002::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8]
] as const) blocked.addSubnet(address, prefix, "ipv6")

/** True for loopback, private, link-local, carrier-grade NAT, documentation, multicast and reserved addresses (IPv4-mapped IPv6 included). */
export const isPrivateAddress = (address: string): boolean => {
  const family = net.isIP(address)
  if (family === 4) return blocked.check(address, "ipv4")
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
    if (mapped?.[1] !== undefined) return blocked.check(mapped[1], "ipv4")
    return blocked.check(address, "ipv6")
  }
  return true
}

export class UrlRejected extends Data.TaggedError("UrlRejected")<{ readonly url: string; readonly reason: string }> {}

const hostOf = (url: URL) => url.hostname.replace(/^\[|\]$/g, "")

export class UrlGuard extends Effect.Service<UrlGuard>()("UrlGuard", {
  effect: Effect.gen(function* () {
    const { allowPrivateUrls } = yield* AppConfig

    /** Resolves the host and returns its addresses, refusing private ones unless allowed. */
    const resolve = (raw: string): Effect.Effect<ReadonlyArray<{ address: string; family: number }>, UrlRejected> =>
      Effect.gen(function* () {
        const url = yield* Effect.try({
          try: () => new URL(raw),
          catch: () => new UrlRejected({ url: raw, reason: "not a valid URL" })
        })
        if (url.protocol !== "http:" && url.protocol !== "https:") {
          return yield* new UrlRejected({ url: raw, reason: "only http and https URLs are allowed" })
        }
        const host = hostOf(url)
        const addresses = net.isIP(host) !== 0
          ? [{ address: host, family: net.isIP(host) }]
          : yield* Effect.tryPromise({
            try: () => dns.lookup(host, { all: true, verbatim: true }),
            catch: () => new UrlRejected({ url: raw, reason: `host ${host} does not resolve` })
          })
        if (addresses.length === 0) return yield* new UrlRejected({ url: raw, reason: `host ${host} does not resolve` })
        if (!allowPrivateUrls) {
          const bad = addresses.find((a) => isPrivateAddress(a.address))
          if (bad !== undefined) {
            return yield* new UrlRejected({
              url: raw,
              reason: `host ${host} resolves to a private or reserved address (${bad.address}); set ALLOW_PRIVATE_URLS=true to allow`
            })
          }
        }
        return addresses
      })

    /** Checks a URL against the policy (used at registration and on every outbound call). */
    const check = (raw: string) => Effect.asVoid(allowPrivateUrls ? Effect.void : resolve(raw))

    return { allowPrivateUrls, resolve, check } as const
  })
}) {}
