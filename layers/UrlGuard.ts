// Outbound URL policy: agent and webhook URLs may not reach loopback or private networks unless ALLOW_PRIVATE_URLS, checked after DNS resolution.
import { Data, Effect } from "effect"
import ipaddr from "ipaddr.js"
import * as net from "node:net"
import { AppConfig } from "./Config.js"
import { HostResolver, type ResolvedAddress } from "./outbound/HostResolver.js"

/** Public addresses that still reach a cloud provider's own services from inside its network. */
const PROVIDER_INTERNAL: ReadonlyArray<[ipaddr.IPv4, number]> = [
  [ipaddr.IPv4.parse("168.63.129.16"), 32] // Azure wire server and metadata relay
]
/** IANA global unicast space; other IPv6 space is unassigned or special. */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR("2000::/3")
/** RFC 6052 well-known NAT64 prefix: DNS64 answers with it for IPv4-only names, so the IPv4 address it embeds decides. */
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR("64:ff9b::/96")

const embeddedIPv4 = (address: ipaddr.IPv6): ipaddr.IPv4 => {
  const [hi = 0, lo = 0] = address.parts.slice(6)
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff])
}

/**
 * `::127.0.0.1` is the IPv4-compatible `::7f00:1` (and Node's resolver prints such answers that way), but ipaddr.js
 * reads any `::a.b.c.d` as IPv4-mapped. Writing the dotted tail as two hex groups keeps the address the socket will use.
 */
const dottedTailToHex = (address: string) =>
  address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)(%.*)?$/, (_, a: string, b: string, c: string, d: string, zone: string | undefined) => {
    const hex = (hi: string, lo: string) => ((Number(hi) << 8) | Number(lo)).toString(16)
    return `${hex(a, b)}:${hex(c, d)}${zone ?? ""}`
  })

const ipv4Refusal = (address: ipaddr.IPv4): string | undefined => {
  const range = address.range()
  if (range !== "unicast") return range
  return PROVIDER_INTERNAL.some((subnet) => address.match(subnet)) ? "cloud provider internal" : undefined
}

const ipv6Refusal = (address: ipaddr.IPv6): string | undefined => {
  const range = address.range()
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d) and well-known NAT64 reach the IPv4 address they carry.
  if (range === "ipv4Mapped" || range === "rfc6145" || (range === "rfc6052" && address.match(NAT64_WELL_KNOWN))) {
    const inner = ipv4Refusal(embeddedIPv4(address))
    return inner === undefined ? undefined : `${range} of ${inner}`
  }
  // Everything else special is refused whole, whatever it embeds: local-use NAT64, 6to4, Teredo, site-local, ...
  if (range !== "unicast") return range
  return address.match(GLOBAL_UNICAST) ? undefined : "not global unicast"
}

/**
 * Why `address` (a literal IPv4 or IPv6 address as DNS or a normalised URL gives it) may not be reached, or undefined
 * when it is public. Anything that is not a plain address is refused.
 */
export const addressRefusal = (address: string): string | undefined => {
  const family = net.isIP(address)
  if (family === 0) return "not an IP address"
  try {
    const parsed = ipaddr.parse(family === 6 ? dottedTailToHex(address) : address)
    return parsed instanceof ipaddr.IPv4 ? ipv4Refusal(parsed) : ipv6Refusal(parsed)
  } catch {
    return "not an IP address"
  }
}

/** True for loopback, private, link-local, shared (CGNAT), documentation, multicast, reserved and transition addresses (IPv4 inside IPv6 included). */
export const isPrivateAddress = (address: string): boolean => addressRefusal(address) !== undefined

/** A URL whose host is itself a private or reserved address (the client wrote it: nothing was looked up). */
export const privateLiteralMessage = (host: string, why: string) =>
  `host ${host} is a private or reserved address (${why}); set ALLOW_PRIVATE_URLS=true to allow`

/**
 * The refusal of a host name after a lookup, shared by the registration check and the connect-time check. It says that
 * the URL is not allowed, never what the name resolved to nor whether it resolved at all: a refusal must not turn the
 * service into a probe of names only its own network can resolve.
 */
export const hostNotAllowedMessage = (host: string) =>
  `host ${host} is not allowed: outbound URLs must have public addresses only (set ALLOW_PRIVATE_URLS=true to allow private ones)`

/** The first address that may not be reached, with why; undefined when all are public. */
export const firstRefused = (addresses: ReadonlyArray<{ readonly address: string }>) => {
  for (const { address } of addresses) {
    const why = addressRefusal(address)
    if (why !== undefined) return { address, why }
  }
  return undefined
}

/** The host of a parsed URL without IPv6 brackets; the WHATWG parser already wrote 2130706433, 0x7f.1 or 0177.0.0.1 as 127.0.0.1. */
export const hostOf = (url: URL) => url.hostname.replace(/^\[|\]$/g, "")

export class UrlRejected extends Data.TaggedError("UrlRejected")<{ readonly url: string; readonly reason: string }> {}

export class UrlGuard extends Effect.Service<UrlGuard>()("UrlGuard", {
  effect: Effect.gen(function* () {
    const { allowPrivateUrls } = yield* AppConfig
    const resolver = yield* HostResolver

    /** The URL itself: parsed, http(s), and a literal address checked against the policy. Never looks anything up. */
    const parse = (raw: string): Effect.Effect<{ readonly host: string; readonly literal: number }, UrlRejected> =>
      Effect.gen(function* () {
        const url = yield* Effect.try({
          try: () => new URL(raw),
          catch: () => new UrlRejected({ url: raw, reason: "not a valid URL" })
        })
        if (url.protocol !== "http:" && url.protocol !== "https:") {
          return yield* new UrlRejected({ url: raw, reason: "only http and https URLs are allowed" })
        }
        const host = hostOf(url)
        const literal = net.isIP(host)
        if (literal !== 0 && !allowPrivateUrls) {
          const why = addressRefusal(host)
          if (why !== undefined) return yield* new UrlRejected({ url: raw, reason: privateLiteralMessage(host, why) })
        }
        return { host, literal }
      })

    /** Resolves the host and returns its addresses, refusing private ones unless allowed. */
    const resolve = (raw: string): Effect.Effect<ReadonlyArray<{ address: string; family: number }>, UrlRejected> =>
      Effect.gen(function* () {
        const { host, literal } = yield* parse(raw)
        if (literal !== 0) return [{ address: host, family: literal }]
        // Why a name is refused goes to the log (for the operator), never into the answer.
        const refuse = (detail: string) =>
          Effect.zipRight(
            Effect.logInfo("outbound URL refused", { host, detail }),
            Effect.fail(new UrlRejected({ url: raw, reason: hostNotAllowedMessage(host) }))
          )
        const addresses = yield* Effect.tryPromise(() => resolver.lookup(host)).pipe(
          Effect.catchAll(() => refuse("does not resolve"))
        )
        if (addresses.length === 0) return yield* refuse("no addresses")
        if (!allowPrivateUrls) {
          const bad = firstRefused(addresses)
          if (bad !== undefined) return yield* refuse(`resolves to ${bad.address} (${bad.why})`)
        }
        return addresses
      })

    /** Checks a URL against the policy (used at registration and on every outbound call); may look its host up. */
    const check = (raw: string): Effect.Effect<void, UrlRejected> => (allowPrivateUrls ? Effect.void : Effect.asVoid(resolve(raw)))

    /**
     * What can be checked without a lookup (the URL's form, a literal address): run before the caller has proved
     * anything (a payment, a signature); `check` runs once they have.
     */
    const screen = (raw: string): Effect.Effect<void, UrlRejected> => (allowPrivateUrls ? Effect.void : Effect.asVoid(parse(raw)))

    return { allowPrivateUrls, resolve, check, screen } as const
  }),
  dependencies: [HostResolver.Default]
}) {}
