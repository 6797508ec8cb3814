// The x402 channel and upto contracts we place on local chains: each shipped artifact is what solc makes of its source
// today, the addresses are the ones `@x402/evm` uses, and our ABIs carry every function, event and error of the ABIs
// `@x402/evm` exports (same names, argument and result types, indexed flags).
import { describe, expect, it } from "@effect/vitest"
import {
  BATCH_SETTLEMENT_ADDRESS as OFFICIAL_BATCH_SETTLEMENT,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS as OFFICIAL_ERC3009_COLLECTOR,
  PERMIT2_ADDRESS as OFFICIAL_PERMIT2,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress
} from "@x402/evm"
import { readFile } from "node:fs/promises"
import type { Abi, AbiParameter } from "viem"
import { compileContract, contractKey, readContractSource } from "../../layers/devnet/compile.js"
import { CHANNEL_CONTRACTS } from "../../layers/devnet/channels/contracts.js"
import { channelArtifacts, generateChannelArtifact } from "../../layers/devnet/testUsdcArtifact.js"
import {
  BATCH_SETTLEMENT_ADDRESS,
  channelContractsPresent,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  MULTICALL3_ADDRESS,
  PERMIT2_ADDRESS,
  PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
  UPTO_PERMIT2_PROXY_ADDRESS
} from "../../layers/x402/channelContracts.js"
import { officialBatchSettlementAbi, officialMulticall3Address, officialPermit2DepositCollectorAddress } from "../support/x402Official.js"

const shippedAbi = (name: string): Abi => {
  const found = CHANNEL_CONTRACTS.find((c) => c.name === name)
  if (found === undefined) throw new Error(`no contract ${name}`)
  return found.spec.shipped.abi
}

/** A parameter's canonical type, tuples spelled out: what the selector and the decoding depend on. */
const typeOf = (p: AbiParameter): string =>
  "components" in p && p.components !== undefined && p.type.startsWith("tuple")
    ? `(${p.components.map(typeOf).join(",")})${p.type.slice("tuple".length)}`
    : p.type

/** name(inputs)->(outputs) for functions, name(inputs with indexed flags) for events, name(inputs) for errors. */
const shapes = (abi: Abi): ReadonlyArray<string> =>
  abi.flatMap((item) => {
    if (item.type === "function") return [`function ${item.name}(${item.inputs.map(typeOf).join(",")})->(${item.outputs.map(typeOf).join(",")}) ${item.stateMutability}`]
    if (item.type === "event") return [`event ${item.name}(${item.inputs.map((i) => `${typeOf(i)}${i.indexed === true ? " indexed" : ""}`).join(",")})`]
    if (item.type === "error") return [`error ${item.name}(${item.inputs.map(typeOf).join(",")})`]
    return []
  })

describe("the x402 channel and upto contracts we ship (layers/devnet/channels/*.generated.ts)", () => {
  it.each(channelArtifacts.map((a) => [a.spec.contractName, a] as const))(
    "%s is what solc makes of its source today (else: npm run devnet:artifact)",
    async (_name, artifact) => {
      expect(await generateChannelArtifact(artifact)).toBe(await readFile(artifact.path, "utf8"))
    },
    120_000
  )

  it("are what a devnet start places, without loading solc", async () => {
    for (const c of CHANNEL_CONTRACTS) {
      expect(c.spec.shipped.key).toBe(contractKey(c.spec, await readContractSource(c.spec)))
      expect(await compileContract(c.spec)).toEqual({ abi: c.spec.shipped.abi, bytecode: c.spec.shipped.bytecode })
    }
  })

  it("live at the addresses the official @x402/evm clients use", () => {
    expect(BATCH_SETTLEMENT_ADDRESS).toBe(OFFICIAL_BATCH_SETTLEMENT)
    expect(ERC3009_DEPOSIT_COLLECTOR_ADDRESS).toBe(OFFICIAL_ERC3009_COLLECTOR)
    expect(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS).toBe(officialPermit2DepositCollectorAddress)
    expect(PERMIT2_ADDRESS).toBe(OFFICIAL_PERMIT2)
    expect(UPTO_PERMIT2_PROXY_ADDRESS).toBe(x402UptoPermit2ProxyAddress)
    expect(MULTICALL3_ADDRESS).toBe(officialMulticall3Address)
    expect(CHANNEL_CONTRACTS.map((c) => c.address).sort()).toEqual(
      [BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS, MULTICALL3_ADDRESS].sort()
    )
  })

  it("x402BatchSettlement has every function and event of @x402/evm's batchSettlementABI", () => {
    const ours = shapes(shippedAbi("x402BatchSettlement"))
    const official = shapes(officialBatchSettlementAbi)
    expect(official.length).toBeGreaterThan(15)
    for (const shape of official) expect(ours).toContain(shape)
  })

  it("x402UptoPermit2Proxy has every function, event and error of @x402/evm's x402UptoPermit2ProxyABI", () => {
    const ours = shapes(shippedAbi("x402UptoPermit2Proxy"))
    for (const shape of shapes(x402UptoPermit2ProxyABI)) expect(ours).toContain(shape)
  })

})

describe("channelContractsPresent (the start-up check)", () => {
  const reader = (withCode: ReadonlyArray<string>) => ({
    getCode: ({ address }: { readonly address: `0x${string}` }) => Promise.resolve<`0x${string}` | undefined>(withCode.includes(address) ? "0x6001" : "0x")
  })

  it("offers a scheme only when every contract it needs has code, and says in one line what is missing", async () => {
    const all = [BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS, MULTICALL3_ADDRESS]
    expect((await channelContractsPresent(reader(all), "eip155:8453")).present).toEqual(["batch-settlement", "upto"])

    const noProxy = await channelContractsPresent(reader(all.filter((a) => a !== UPTO_PERMIT2_PROXY_ADDRESS)), "eip155:8453")
    expect(noProxy.present).toEqual(["batch-settlement"])
    expect(noProxy.lines).toEqual([`upto not offered on eip155:8453: no code at x402UptoPermit2Proxy ${UPTO_PERMIT2_PROXY_ADDRESS}`])

    const bare = await channelContractsPresent(reader([]), "eip155:1")
    expect(bare.present).toEqual([])
    expect(bare.missing.map((m) => m.scheme)).toEqual(["batch-settlement", "upto"])
    expect(bare.lines).toHaveLength(2)
  })

  it("fails when the chain cannot be read (the caller decides), instead of reporting the contracts missing", async () => {
    const broken = { getCode: () => Promise.reject(new Error("connection refused")) }
    await expect(channelContractsPresent(broken, "eip155:8453")).rejects.toThrow("connection refused")
  })
})
