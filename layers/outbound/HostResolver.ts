// The DNS lookup every outbound check uses (registration check, connect-time guard): one service so tests can script a rebinding name.
import { Effect } from "effect"
import * as dns from "node:dns/promises"

export interface ResolvedAddress {
  readonly address: string
  /** 4 or 6. */
  readonly family: number
}

export class HostResolver extends Effect.Service<HostResolver>()("HostResolver", {
  succeed: {
    /** Every address of `hostname` in the resolver's order; rejects like dns.lookup (ENOTFOUND, ...). */
    lookup: (hostname: string): Promise<ReadonlyArray<ResolvedAddress>> => dns.lookup(hostname, { all: true, verbatim: true })
  }
}) {}
