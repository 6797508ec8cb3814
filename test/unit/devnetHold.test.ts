// DEVNET_HOLD_SECONDS (issue 31): a devnet-only cap on the earnings hold, refused outside the devnet.
import { ConfigProvider, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { appConfig } from "../../layers/Config.js"

const load = (env: Record<string, string>) => Effect.runPromiseExit(appConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))

describe("DEVNET_HOLD_SECONDS", () => {
  it("on the devnet it caps the hold (in ms); unset, no cap", async () => {
    const set = await load({ DEVNET_HOLD_SECONDS: "5" })
    expect(Exit.isSuccess(set) && set.value.devnetHoldMs).toBe(5_000)
    const unset = await load({})
    expect(Exit.isSuccess(unset) && unset.value.devnetHoldMs).toBeUndefined()
  })

  it("is refused with CHAIN_RPC_URL, and out of range", async () => {
    const rpc = await load({ DEVNET_HOLD_SECONDS: "5", CHAIN_RPC_URL: "https://sepolia.base.org" })
    expect(Exit.isFailure(rpc) && String(rpc.cause)).toMatch(/DEVNET_HOLD_SECONDS applies to the devnet only/)
    expect(Exit.isFailure(await load({ DEVNET_HOLD_SECONDS: "-1" }))).toBe(true)
  })
})
