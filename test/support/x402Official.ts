// What `@x402/evm` uses but does not export from its public entry points: the batch settlement ABI, the Permit2
// deposit collector's address and the ERC-3009 deposit collector data encoding. They sit in the package's bundled
// chunks; this finds the chunk that defines each (by its text, since chunk names change between builds) and loads it.
import { readdir, readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import type { Abi, Address } from "viem"

const require = createRequire(import.meta.url)
const esmDir = join(dirname(require.resolve("@x402/evm")), "..", "esm")

const chunkDefining = async (declaration: string): Promise<Record<string, unknown>> => {
  for (const file of (await readdir(esmDir)).filter((f) => f.startsWith("chunk-") && f.endsWith(".mjs"))) {
    if ((await readFile(join(esmDir, file), "utf8")).includes(declaration)) {
      const loaded: unknown = await import(pathToFileURL(join(esmDir, file)).href)
      if (isRecord(loaded)) return loaded
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

const abi = abiChunk["batchSettlementABI"]
const collector = constantsChunk["PERMIT2_DEPOSIT_COLLECTOR_ADDRESS"]
const buildCollectorData = encodingChunk["buildErc3009CollectorData"]
if (!isAbi(abi) || !isAddress(collector) || typeof buildCollectorData !== "function") {
  throw new Error("@x402/evm: unexpected shape of batchSettlementABI / PERMIT2_DEPOSIT_COLLECTOR_ADDRESS / buildErc3009CollectorData")
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
