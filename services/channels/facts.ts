// Chain facts about a channel (a claim landed or failed, a settle or refund moved money, the payer started or finalized a
// withdrawal), delivered to the channel's machine inside the transaction that records them: the machine books the
// ledger movement (settles), writes off what was never claimed, and raises the operator's attention.
import type { SqlError } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import type { ChannelEvent } from "../../machines/channel.js"
import { MachineHost } from "../../machines/Host.js"

export interface ChannelFactsShape {
  /** Runs in the caller's transaction; a channel without a machine row takes nothing. */
  readonly deliver: (channelId: string, event: ChannelEvent) => Effect.Effect<void, SqlError.SqlError>
}

export class ChannelFacts extends Context.Tag("channels/ChannelFacts")<ChannelFacts, ChannelFactsShape>() {
  /** The channel machine on the host. */
  static readonly Live = Layer.effect(
    ChannelFacts,
    Effect.map(MachineHost, (host) => ({ deliver: (channelId, event) => Effect.asVoid(host.deliver("channel", channelId, event)) }))
  ).pipe(Layer.provide(MachineHost.Default))
}
