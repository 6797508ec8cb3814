// Smart-account payers for tests: the fixture ERC-1271 account and its CREATE2 factory (contracts/fixtures/SmartAccount.sol,
// compiled with solc), accounts deployed or counterfactual (ERC-6492), and x402 payments and signers for them.
import type { ClientEvmSigner } from "@x402/evm"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import {
  type Abi,
  createTestClient,
  encodeFunctionData,
  getAddress,
  getContractAddress,
  type Hex,
  hashTypedData,
  http,
  parseEther,
  serializeErc6492Signature,
  type TypedDataDefinition
} from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { inject } from "vitest"
import { compileContract, type ContractSpec } from "../../layers/devnet/compile.js"
import { transferWithAuthorizationTypes, usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { devAccount, publicClient, TREASURY, walletFor } from "./clients.js"

const FACTORY: ContractSpec = {
  sourcePath: fileURLToPath(new URL("../../contracts/fixtures/SmartAccount.sol", import.meta.url)),
  sourceName: "SmartAccount.sol",
  contractName: "SmartAccountFactory",
  // Not shipped: compiled by solc (cached under node_modules/.cache).
  shipped: { key: "", abi: [], bytecode: "0x" }
}

/** A deployer made for this run: its factories' addresses are known before they exist (nonce 0, 1, ...). */
export const factoryDeployer = privateKeyToAccount(generatePrivateKey())
export const factoryAddress = (nonce: number) => getContractAddress({ from: factoryDeployer.address, nonce: BigInt(nonce) })

/** The factory as solc compiles it (once per process; cached on disk between runs). */
const compiledFactory = () => compileContract(FACTORY, join(process.cwd(), "node_modules", ".cache", "test-usdc"))

/** Deploys the next factory from the run's deployer (with gas from anvil); the nth call lands at `factoryAddress(n)`. */
export const deployFactory = async (): Promise<`0x${string}`> => {
  const compiled = await compiledFactory()
  const anvil = createTestClient({ mode: "anvil", transport: http(inject("rpcUrl")) })
  await anvil.setBalance({ address: factoryDeployer.address, value: parseEther("10") })
  const wallet = walletFor(factoryDeployer)
  const hash = await wallet.deployContract({ abi: compiled.abi, bytecode: compiled.bytecode })
  const receipt = await wallet.waitForTransactionReceipt({ hash })
  if (receipt.status !== "success" || receipt.contractAddress == null) throw new Error("factory deployment failed")
  return receipt.contractAddress
}

export interface SmartAccount {
  readonly address: `0x${string}`
  readonly owner: PrivateKeyAccount
  readonly factory: `0x${string}`
  /** The factory call that deploys it (ERC-6492's factoryData). */
  readonly factoryData: Hex
}

/**
 * A smart account owned by a fresh key, funded with `usdc` micro-USDC by dev account 8; deployed now or left
 * counterfactual (its address is the factory's CREATE2 address).
 */
export const smartAccount = async (factory: `0x${string}`, options: { readonly deployed: boolean; readonly usdc: bigint }): Promise<SmartAccount> => {
  const factoryAbi: Abi = (await compiledFactory()).abi
  const owner = privateKeyToAccount(generatePrivateKey())
  const salt = `0x${randomBytes(32).toString("hex")}` as Hex
  const address = getAddress(await publicClient().readContract({ address: factory, abi: factoryAbi, functionName: "accountAddress", args: [owner.address, salt] }) as string)
  const factoryData = encodeFunctionData({ abi: factoryAbi, functionName: "deploy", args: [owner.address, salt] })
  const funder = walletFor(devAccount(8))
  const hashes = [await funder.writeContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "transfer", args: [address, options.usdc] })]
  if (options.deployed) hashes.push(await funder.sendTransaction({ to: factory, data: factoryData }))
  for (const hash of hashes) {
    const { status } = await funder.waitForTransactionReceipt({ hash })
    if (status !== "success") throw new Error("setting up the smart account failed")
  }
  return { address, owner, factory, factoryData }
}

export const hasCode = async (address: `0x${string}`) => {
  const code = await publicClient().getCode({ address })
  return code !== undefined && code !== "0x"
}

export interface SignOptions {
  /** Another key than the owner (a wrong signature). */
  readonly signer?: PrivateKeyAccount
  /** Behind the account's one-byte type prefix (66 bytes: the token's bytes overload, never the batcher). */
  readonly prefixed?: boolean
  /** How long the authorization stays valid from now (default 900 s). */
  readonly validForSeconds?: number
}

/**
 * What the account's wallet answers to eth_signTypedData: its owner's signature of the typed data's hash (what the
 * account's isValidSignature checks), ERC-6492-wrapped while the account is not deployed.
 */
export const signAsAccount = async (account: SmartAccount, typedData: TypedDataDefinition, options: SignOptions = {}): Promise<Hex> => {
  const raw = await (options.signer ?? account.owner).sign({ hash: hashTypedData(typedData) })
  const signature: Hex = options.prefixed === true ? `0x00${raw.slice(2)}` : raw
  return (await hasCode(account.address)) ? signature : serializeErc6492Signature({ address: account.factory, data: account.factoryData, signature })
}

/** The account as an x402 v2 client signer (@x402/evm's ClientEvmSigner): what a smart-account wallet gives the client. */
export const clientSigner = (account: SmartAccount): ClientEvmSigner => ({
  address: account.address,
  signTypedData: (message) =>
    signAsAccount(account, { domain: message.domain, types: message.types, primaryType: message.primaryType, message: message.message } as TypedDataDefinition)
})

/** An X-PAYMENT header (x402 v1 exact EVM) from the account to the treasury, made by hand. */
export const smartPayment = async (account: SmartAccount, value: bigint, options: SignOptions = {}) => {
  const now = BigInt(Math.floor(Date.now() / 1000))
  const authorization = { from: account.address, to: TREASURY, value, validAfter: now - 600n, validBefore: now + BigInt(options.validForSeconds ?? 900), nonce: `0x${randomBytes(32).toString("hex")}` as Hex }
  const signature = await signAsAccount(account, {
    domain: { name: "USDC", version: "2", chainId: 84532, verifyingContract: getAddress(inject("usdcAddress")) },
    types: transferWithAuthorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: authorization
  }, options)
  const payload = {
    x402Version: 1,
    scheme: "exact",
    network: "base-sepolia",
    payload: {
      signature,
      authorization: { ...authorization, value: value.toString(), validAfter: authorization.validAfter.toString(), validBefore: authorization.validBefore.toString() }
    }
  }
  return { header: Buffer.from(JSON.stringify(payload)).toString("base64"), nonce: authorization.nonce, signature }
}

/** The same account with another key in its owner's place: what it signs, the account does not accept. */
export const strangerOwned = (account: SmartAccount): SmartAccount => ({ ...account, owner: privateKeyToAccount(generatePrivateKey()) })
