// What `@x402/evm` uses but does not export from its public entry points: the batch settlement ABI, the Permit2
// deposit collector's address, the ERC-3009 deposit collector data encoding and its Multicall3 reads. They sit in the
// package's bundled chunks; this finds the chunk that defines each (by its text, since chunk names change between
// builds) and loads it.
import { readdir, readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import type { Abi, Address } from "viem"

const require = createRequire(import.meta.url)
const esmDir = join(dirname(require.resolve("@x402/evm")), "..", "esm")

/** The chunk's exports, and its text (for a constant it uses but does not export). */
const chunkDefining = async (declaration: string): Promise<Record<string, unknown> & { readonly "#text": string }> => {
  for (const file of (await readdir(esmDir)).filter((f) => f.startsWith("chunk-") && f.endsWith(".mjs"))) {
    const text = await readFile(join(esmDir, file), "utf8")
    if (text.includes(declaration)) {
      const loaded: unknown = await import(pathToFileURL(join(esmDir, file)).href)
      if (isRecord(loaded)) return { ...loaded, "#text": text }
    }
  }
  throw new Error(`@x402/evm: no chunk defines ${declaration}`)
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null
const isAbi = (u: unknown): u is Abi => Array.isArray(u) && u.every((i) => typeof i === "object" && i !== null && "type" in i)
const isHex = (u: unknown): u is `0x${string}` => typeof u === "string" && /^0x[0-9a-fA-F]*$/.test(u)
const isAddress = (u: unknown): u is Address => typeof u === "string" && /^0x[0-9a-fA-F]{40}$/.test(u)

const abiChunk = await chunkDefining("var batchSettlementABI = [")
const constantsChunk = await chunkDefining("var PERMIT2_DEPOSIT_COLLECTOR_ADDRESS =")
const encodingChunk = await chunkDefining("function buildErc3009CollectorData(")
const multicallChunk = await chunkDefining("var MULTICALL3_ADDRESS =")

const abi = abiChunk["batchSettlementABI"]
const collector = constantsChunk["PERMIT2_DEPOSIT_COLLECTOR_ADDRESS"]
const buildCollectorData = encodingChunk["buildErc3009CollectorData"]
const multicall3 = /var MULTICALL3_ADDRESS = "(0x[0-9a-fA-F]{40})"/.exec(multicallChunk["#text"])?.[1]
const multicall = multicallChunk["multicall"]
if (!isAbi(abi) || !isAddress(collector) || typeof buildCollectorData !== "function" || !isAddress(multicall3) || typeof multicall !== "function") {
  throw new Error("@x402/evm: unexpected shape of batchSettlementABI / PERMIT2_DEPOSIT_COLLECTOR_ADDRESS / buildErc3009CollectorData / multicall")
}

/** `@x402/evm`'s `batchSettlementABI` (what its client and facilitator call on x402BatchSettlement). */
export const officialBatchSettlementAbi: Abi = abi
/** `@x402/evm`'s `PERMIT2_DEPOSIT_COLLECTOR_ADDRESS`. */
export const officialPermit2DepositCollectorAddress: Address = collector

/** `@x402/evm`'s `buildErc3009CollectorData(validAfter, validBefore, salt, signature)`: the facilitator's deposit data. */
export const officialErc3009CollectorData = (validAfter: string, validBefore: string, salt: string, signature: `0x${string}`): `0x${string}` => {
  const data: unknown = Reflect.apply(buildCollectorData, undefined, [validAfter, validBefore, salt, signature])
  if (!isHex(data)) throw new Error("buildErc3009CollectorData returned no hex")
  return data
}

/** `@x402/evm`'s `MULTICALL3_ADDRESS` (used by its `multicall`, not exported). */
export const officialMulticall3Address: Address = multicall3

/** `@x402/evm`'s `multicall(readContract, calls)`: how its facilitators read channel state (`tryAggregate`). */
export const officialMulticall = async (readContract: (args: never) => Promise<unknown>, calls: ReadonlyArray<{ address: Address; abi: Abi; functionName: string; args: ReadonlyArray<unknown> }>) => {
  const results: unknown = await Reflect.apply(multicall, undefined, [readContract, calls])
  if (!Array.isArray(results)) throw new Error("multicall returned no array")
  return results.map((r: unknown) => (isRecord(r) ? { status: r["status"], result: r["result"] } : { status: "?", result: undefined }))
}
