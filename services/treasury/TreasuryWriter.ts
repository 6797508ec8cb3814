// The one writer of treasury transactions, one per configured network (networkWriter.ts): its methods are the primary
// network's (withdrawals and payouts go out there); `on(network)` is another network's, for what belongs to that network
// (a settlement, a refund of a payment made there, the transactions the worker follows).
import { Effect } from "effect"
import { Networks } from "../../layers/Networks.js"
import { MachineHost } from "../../machines/Host.js"
import { makeNetworkWriter, type NetworkWriter } from "./networkWriter.js"
import { TreasuryRepo } from "./Repo.js"

export { TREASURY_LEASE_MS, TreasuryError, type TxOutcome } from "./networkWriter.js"

export class TreasuryWriter extends Effect.Service<TreasuryWriter>()("treasury/TreasuryWriter", {
  effect: Effect.gen(function* () {
    const networks = yield* Networks
    const writers = new Map<string, NetworkWriter>()
    for (const chain of networks.all) writers.set(chain.network, yield* makeNetworkWriter(chain))
    const primary = writers.get(networks.primary.network)!
    /** The writer of the network a row names ('' or unknown: the primary's). */
    const on = (network: string | null | undefined): NetworkWriter => writers.get(networks.of(network).network) ?? primary
    return { ...primary, on, all: [...writers.values()] } as const
  }),
  dependencies: [TreasuryRepo.Default, MachineHost.Default]
}) {}
