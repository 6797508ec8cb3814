// The batch-settlement channel terms we offer on each network, and the settings of the channel workers: the receiver (our
// treasury), the receiver authorizer (the key that signs our claims and cooperative refunds: CHANNEL_AUTHORIZER_KEY,
// the treasury key by default), the withdrawal delay we ask for, and when claims go out. A network whose contracts
// have no code (layers/x402/channelContracts.ts) offers no channels; the start-up log says so in one line.
import { Config, Effect, Option, Redacted } from "effect"
import { type Account, type LocalAccount } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import type { ChainShape } from "../../layers/Chain.js"
import { Networks } from "../../layers/Networks.js"
import { channelContractsPresent } from "../../layers/x402/channelContracts.js"
import { MAX_WITHDRAW_DELAY_SECONDS, MIN_WITHDRAW_DELAY_SECONDS, type OurChannelTerms } from "../../layers/x402/batchSettlement/channelConfig.js"

/** One network's channel terms: what a channel config must name, and who signs our side. */
export interface NetworkChannelTerms extends OurChannelTerms {
  readonly network: string
  readonly chain: ChainShape
  /** Signs claims (`claimWithSignature`) and cooperative refunds (`refundWithSignature`). */
  readonly authorizer: Account
}

const settings = Effect.gen(function* () {
  const authorizerKey = yield* Config.option(Config.redacted(Config.string("CHANNEL_AUTHORIZER_KEY").pipe(
    Config.validate({ message: "CHANNEL_AUTHORIZER_KEY must be 0x followed by 64 hex characters", validation: (s) => /^0x[0-9a-fA-F]{64}$/.test(s) })
  )))
  const withdrawDelay = yield* Config.integer("CHANNEL_WITHDRAW_DELAY_SECONDS").pipe(
    Config.withDefault(86_400),
    Config.validate({
      message: `CHANNEL_WITHDRAW_DELAY_SECONDS must be between ${MIN_WITHDRAW_DELAY_SECONDS} and ${MAX_WITHDRAW_DELAY_SECONDS} (15 minutes to 30 days)`,
      validation: (n) => n >= MIN_WITHDRAW_DELAY_SECONDS && n <= MAX_WITHDRAW_DELAY_SECONDS
    })
  )
  const claimIntervalSeconds = yield* Config.integer("CHANNEL_CLAIM_INTERVAL_SECONDS").pipe(
    Config.withDefault(60),
    Config.validate({ message: "CHANNEL_CLAIM_INTERVAL_SECONDS must be between 1 and 86400", validation: (n) => n >= 1 && n <= 86_400 })
  )
  const claimAtMicros = yield* Config.integer("CHANNEL_CLAIM_AT_MICRO_USDC").pipe(
    Config.withDefault(10_000_000),
    Config.validate({ message: "CHANNEL_CLAIM_AT_MICRO_USDC must be at least 1", validation: (n) => n >= 1 })
  )
  const channelsOff = yield* Config.boolean("CHANNELS_DISABLED").pipe(Config.withDefault(false))
  return { authorizerKey, withdrawDelay, claimIntervalSeconds, claimAt: BigInt(claimAtMicros), channelsOff } as const
})

export class ChannelTerms extends Effect.Service<ChannelTerms>()("channels/Terms", {
  effect: Effect.gen(function* () {
    const networks = yield* Networks
    const s = yield* Effect.orDie(settings)
    const terms = new Map<string, NetworkChannelTerms>()
    for (const chain of networks.all) {
      if (s.channelsOff) break
      const authorizer: Option.Option<Account> = Option.isSome(s.authorizerKey)
        ? Option.some<LocalAccount>(privateKeyToAccount(Redacted.value(s.authorizerKey.value) as `0x${string}`))
        : Option.map(chain.signer, (signer) => signer.account)
      if (Option.isNone(authorizer)) {
        yield* Effect.logInfo(`batch-settlement not offered on ${chain.network}: no treasury key or CHANNEL_AUTHORIZER_KEY to sign claims`)
        continue
      }
      const presence = yield* Effect.tryPromise(() => channelContractsPresent(chain.publicClient, chain.network)).pipe(
        Effect.catchAll((e) => Effect.as(Effect.logWarning(`batch-settlement not offered on ${chain.network}: its contracts could not be read (${String(e.error)})`), undefined))
      )
      if (presence === undefined) continue
      for (const line of presence.lines) yield* Effect.logInfo(line)
      if (!presence.present.includes("batch-settlement")) continue
      terms.set(chain.network, {
        network: chain.network,
        chain,
        chainId: chain.chainId,
        receiver: chain.treasury,
        receiverAuthorizer: authorizer.value.address,
        token: chain.usdc.address,
        withdrawDelay: s.withdrawDelay,
        authorizer: authorizer.value
      })
    }
    return {
      /** The terms on `network` (a network name as stored on rows), if channels are offered there. */
      on: (network: string): Option.Option<NetworkChannelTerms> => Option.fromNullable(terms.get(network)),
      all: [...terms.values()],
      claimIntervalSeconds: s.claimIntervalSeconds,
      /** A channel whose unclaimed charges reach this is claimed at once, without waiting for the schedule. */
      claimAt: s.claimAt
    } as const
  })
}) {}
