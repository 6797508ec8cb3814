// Who may make the marketplace ask an agent for a quote (a dynamic capability's price, asked before the call is charged),
// so that a payer's quote never waits on strangers: each agent's quote requests in flight are split between callers
// whose payment or credit signature verified (keyed by that payer) and unverified callers (keyed by their address, who
// share a small pool); each client has a few in flight per agent and a budget per minute across agents. Pure and
// synchronous (the caller passes the time); one per process. docs/security.md "A payer's quote does not depend on strangers".
import { isIPv6 } from "node:net"

export interface QuoteAdmissionOptions {
  /** Most quote requests in flight to one agent, all callers together. */
  readonly maxInFlightPerAgent: number
  /** Of those, most for unverified callers (no verified payment or credit signature); the rest are kept for payers. */
  readonly maxUnverifiedInFlightPerAgent: number
  /** Most quote requests one client has in flight to one agent. */
  readonly maxInFlightPerClient: number
  /** Most quote requests (that reach an agent) one client causes per window, all agents together. */
  readonly perClientPerWindow: number
  readonly windowMs: number
  /** Most clients counted in one window; a new unverified client past it is answered as if its share were taken. */
  readonly maxClients: number
  /** When a slot held by the client itself frees at the latest (the quote timeout), for Retry-After. */
  readonly quoteTimeoutMs: number
}

/** Who asks: a payer whose payment or credit signature verified, or an unverified client by its address. */
export type QuoteCaller =
  | { readonly verified: true; readonly payer: string }
  | { readonly verified: false; readonly address: string }

export type Admission =
  /** Ask the agent; `release` once its answer (or failure) is in. */
  | { readonly _tag: "Admitted"; readonly release: () => void }
  /** The client is over its own limit (`in_flight` to this agent, or its `rate` per window): come back after Retry-After. */
  | { readonly _tag: "OverLimit"; readonly limit: "in_flight" | "rate"; readonly retryAfterSeconds: number }
  /** Other callers hold every slot this caller may use at this agent. */
  | { readonly _tag: "Busy" }

/**
 * The client key of an address: an IPv6 address counts by its /64 (one subscriber's block, whose addresses are free to
 * it), anything else as it is.
 */
export const addressKey = (address: string): string => {
  const bare = address.startsWith("::ffff:") && !address.slice(7).includes(":") ? address.slice(7) : address
  if (!isIPv6(bare)) return bare
  const [head = "", tail = ""] = bare.toLowerCase().split("::")
  const left = head === "" ? [] : head.split(":")
  const right = tail === "" ? [] : tail.split(":")
  const groups = bare.includes("::") ? [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right] : left
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, "")).join(":")}::/64`
}

const clientKey = (caller: QuoteCaller) => (caller.verified ? `payer:${caller.payer.toLowerCase()}` : `addr:${addressKey(caller.address)}`)

export const makeQuoteAdmission = (options: QuoteAdmissionOptions) => {
  const inFlight = new Map<string, number>()
  const unverifiedInFlight = new Map<string, number>()
  const clientInFlight = new Map<string, number>()
  let windowStart = 0
  const counts = new Map<string, number>()

  const bump = (map: Map<string, number>, key: string, by: 1 | -1) => {
    const n = (map.get(key) ?? 0) + by
    if (n <= 0) map.delete(key)
    else map.set(key, n)
  }

  /** Whether `caller` may have one more quote request to `agentId` now; if so it is counted and in flight until released. */
  const admit = (agentId: string, caller: QuoteCaller, now: number): Admission => {
    const start = Math.floor(now / options.windowMs) * options.windowMs
    if (start !== windowStart) {
      windowStart = start
      counts.clear()
    }
    const client = clientKey(caller)
    const counted = counts.get(client)
    // Past maxClients a new unverified client is answered busy; a payer is always counted (each needs funds).
    if (counted === undefined && !caller.verified && counts.size >= options.maxClients) return { _tag: "Busy" }
    if ((counted ?? 0) >= options.perClientPerWindow) {
      return { _tag: "OverLimit", limit: "rate", retryAfterSeconds: Math.max(1, Math.ceil((start + options.windowMs - now) / 1000)) }
    }
    const perClient = `${agentId}\u0000${client}`
    if ((clientInFlight.get(perClient) ?? 0) >= options.maxInFlightPerClient) {
      return { _tag: "OverLimit", limit: "in_flight", retryAfterSeconds: Math.max(1, Math.ceil(options.quoteTimeoutMs / 1000)) }
    }
    if ((inFlight.get(agentId) ?? 0) >= options.maxInFlightPerAgent) return { _tag: "Busy" }
    if (!caller.verified && (unverifiedInFlight.get(agentId) ?? 0) >= options.maxUnverifiedInFlightPerAgent) return { _tag: "Busy" }

    counts.set(client, (counted ?? 0) + 1)
    bump(inFlight, agentId, 1)
    bump(clientInFlight, perClient, 1)
    if (!caller.verified) bump(unverifiedInFlight, agentId, 1)
    let released = false
    return {
      _tag: "Admitted",
      release: () => {
        if (released) return
        released = true
        bump(inFlight, agentId, -1)
        bump(clientInFlight, perClient, -1)
        if (!caller.verified) bump(unverifiedInFlight, agentId, -1)
      }
    }
  }

  return { admit, inFlight: (agentId: string) => inFlight.get(agentId) ?? 0 } as const
}
