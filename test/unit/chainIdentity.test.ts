// The chain-identity comparison: a network's record against what its RPC reports now, and what the refusal tells the
// operator to do for the way the service runs.
import { Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { adviceFor, type ChainIdentity, compareIdentity } from "../../layers/chainIdentity.js"
import { DatabaseInfo } from "../../layers/Pg.js"

const baseSepolia: ChainIdentity = {
  network: "base-sepolia",
  primary: true,
  chainId: 84532,
  anchorBlock: 1,
  anchorHash: `0x${"aa".repeat(32)}`,
  usdc: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  batcher: "0xFec805ee42cBE848757647DCCCC4FA0464b4CB7c"
}
const ethereum: ChainIdentity = { ...baseSepolia, network: "ethereum", primary: false, chainId: 1, anchorHash: `0x${"bb".repeat(32)}` }

describe("compareIdentity", () => {
  it("a network seen for the first time is recorded; the same chain again is the same", () => {
    expect(compareIdentity([], baseSepolia)).toEqual({ _tag: "Record" })
    expect(compareIdentity([baseSepolia], baseSepolia)).toEqual({ _tag: "Same" })
    expect(compareIdentity([baseSepolia], { ...baseSepolia, usdc: baseSepolia.usdc.toLowerCase() })).toEqual({ _tag: "Same" })
  })

  it("another block 1 (a new devnet), chain id, USDC or batcher is another chain, named in the refusal", () => {
    const genesis = compareIdentity([baseSepolia], { ...baseSepolia, anchorHash: `0x${"cc".repeat(32)}` })
    expect(genesis).toEqual({
      _tag: "Mismatch",
      what: `network "base-sepolia" is chain id 84532, block 1 ${baseSepolia.anchorHash}, USDC ${baseSepolia.usdc}, batcher ${baseSepolia.batcher}, but the chain now has block 1 0x${"cc".repeat(32)}`
    })
    expect(compareIdentity([baseSepolia], { ...baseSepolia, usdc: "0x0000000000000000000000000000000000000001" })._tag).toBe("Mismatch")
    expect(compareIdentity([baseSepolia], { ...baseSepolia, batcher: "0x0000000000000000000000000000000000000002" })._tag).toBe("Mismatch")
    expect(compareIdentity([baseSepolia], { ...baseSepolia, batcher: null })._tag).toBe("Mismatch")
  })

  it("a batcher configured where none was recorded completes the record", () => {
    expect(compareIdentity([{ ...baseSepolia, batcher: null }], baseSepolia)).toEqual({ _tag: "SetBatcher" })
  })

  it("several networks: each is compared with its own record; a second network added later is recorded", () => {
    expect(compareIdentity([baseSepolia, ethereum], ethereum)).toEqual({ _tag: "Same" })
    expect(compareIdentity([baseSepolia], ethereum)).toEqual({ _tag: "Record" })
    expect(compareIdentity([baseSepolia, ethereum], { ...ethereum, anchorHash: `0x${"dd".repeat(32)}` })._tag).toBe("Mismatch")
    expect(compareIdentity([baseSepolia], { ...baseSepolia, anchorHash: "none" })._tag).toBe("Mismatch")
  })

  it("a primary network other than the recorded one is another chain's database", () => {
    const step = compareIdentity([baseSepolia], { ...baseSepolia, network: "base", chainId: 8453 })
    expect(step).toEqual({
      _tag: "Mismatch",
      what: `it belongs to network "base-sepolia" (chain id 84532, block 1 ${baseSepolia.anchorHash}, USDC ${baseSepolia.usdc}, batcher ${baseSepolia.batcher}), not "base"`
    })
  })
})

describe("adviceFor", () => {
  const external = DatabaseInfo.make({ mode: "external", url: Redacted.make("postgres://x"), dataDir: undefined })
  it("devnet, embedded database: which directories to delete", () => {
    const inPlace = DatabaseInfo.make({ mode: "embedded", url: Redacted.make("postgres://x"), dataDir: "/home/me/app/.data/postgres" })
    expect(adviceFor("devnet", inPlace, "/home/me/app/.data")).toBe(
      "To start over on this devnet, stop the service and delete /home/me/app/.data/postgres, or all of DATA_DIR /home/me/app/.data to start the chain over too"
    )
    const moved = DatabaseInfo.make({ mode: "embedded", url: Redacted.make("postgres://x"), dataDir: "/var/tmp/agent-marketplace/data-0123456789abcdef/postgres" })
    expect(adviceFor("devnet", moved, "/root/app/.data")).toBe(
      "To start over on this devnet, stop the service and delete /root/app/.data/postgres (the database, kept in /var/tmp/agent-marketplace/data-0123456789abcdef/postgres), or all of DATA_DIR /root/app/.data to start the chain over too"
    )
  })
  it("devnet with DATABASE_URL: a fresh database; a real chain: the RPC setting or a new database", () => {
    expect(adviceFor("devnet", external, "/x")).toBe("To start over on this devnet, give it a fresh database (a new, empty DATABASE_URL)")
    expect(adviceFor("rpc", external, "/x")).toBe(
      "Point the RPC setting at the chain this database belongs to, or give this chain a new, empty database (DATABASE_URL)"
    )
  })
})
