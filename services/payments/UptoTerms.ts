// The x402 `upto` terms we offer on each network: the receiver (our treasury), the facilitator the payer's Permit2
// witness must name (our treasury writer's key, the only caller the x402UptoPermit2Proxy lets settle it), the token, and
// how long an authorization must stay valid: the agent's time plus the settlement's (a settlement after the deadline
// reverts). A network without Permit2 and the proxy (layers/x402/channelContracts.ts) or without a treasury key offers
// no upto; the start-up log says so in one line. UPTO_DISABLED turns it off everywhere.
import { Config, Effect, Option } from "effect"
import { DEFAULT_EXECUTION_TIMEOUT_MS } from "../../layers/AgentProxy.js"
import type { ChainShape } from "../../layers/Chain.js"
import { Networks } from "../../layers/Networks.js"
import { channelContractsPresent } from "../../layers/x402/channelContracts.js"
import { SETTLEMENT_SLACK_MS } from "../executions/deadline.js"

/** Beyond the agent's time and the settlement's slack, what the offer adds for the request's own way (client → us). */
const OFFER_MARGIN_SECONDS = 60

export interface NetworkUptoTerms {
  readonly network: string
  readonly chain: ChainShape
  readonly receiver: `0x${string}`
  /** Our treasury writer's address: `witness.facilitator` of every authorization we accept. */
  readonly facilitator: `0x${string}`
  readonly token: `0x${string}`
}

export class UptoTerms extends Effect.Service<UptoTerms>()("payments/UptoTerms", {
  effect: Effect.gen(function* () {
    const networks = yield* Networks
    const off = yield* Config.boolean("UPTO_DISABLED").pipe(Config.withDefault(false), Effect.orDie)
    const timeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS), Effect.orDie)
    /** What an authorization must have left when it is verified: the agent's time and the settlement's. */
    const minValiditySeconds = Math.ceil((timeoutMs + SETTLEMENT_SLACK_MS) / 1000)
    const terms = new Map<string, NetworkUptoTerms>()
    for (const chain of networks.all) {
      if (off) break
      if (Option.isNone(chain.signer) || chain.settlement !== "local") {
        yield* Effect.logInfo(`upto not offered on ${chain.network}: no treasury key settles payments there`)
        continue
      }
      const presence = yield* Effect.tryPromise(() => channelContractsPresent(chain.publicClient, chain.network)).pipe(
        Effect.catchAll((e) => Effect.as(Effect.logWarning(`upto not offered on ${chain.network}: its contracts could not be read (${String(e.error)})`), undefined))
      )
      if (presence === undefined || !presence.present.includes("upto")) continue
      terms.set(chain.network, {
        network: chain.network,
        chain,
        receiver: chain.treasury,
        facilitator: chain.signer.value.account.address,
        token: chain.usdc.address
      })
    }
    return {
      on: (network: string): Option.Option<NetworkUptoTerms> => Option.fromNullable(terms.get(network)),
      all: [...terms.values()],
      minValiditySeconds,
      /** The offer's `maxTimeoutSeconds`: the official client signs `deadline = now + this`. */
      maxTimeoutSeconds: minValiditySeconds + OFFER_MARGIN_SECONDS
    } as const
  })
}) {}
