// Clients for tests: dev-account wallets, the official x402 client, hand-made (and deliberately broken) payments, wallet signatures.
import { randomBytes } from "node:crypto"
import { createPublicClient, createWalletClient, getAddress, type Hex, http, parseSignature, publicActions } from "viem"
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { inject } from "vitest"
import { wrapFetchWithPayment } from "x402-fetch"
import { DEV_PRIVATE_KEYS, devnetChain } from "../../layers/devnet/anvil.js"
import { transferWithAuthorizationTypes, usdcAbi } from "../../layers/devnet/usdcAbi.js"

export const devKey = (i: number): Hex => {
  const key = DEV_PRIVATE_KEYS[i]
  if (key === undefined) throw new Error(`no dev key ${i}`)
  return key
}
export const devAccount = (i: number): PrivateKeyAccount => privateKeyToAccount(devKey(i))
export const TREASURY = devAccount(0).address

const chain = () => devnetChain(inject("rpcUrl"))
export const publicClient = () => createPublicClient({ chain: chain(), transport: http(inject("rpcUrl")), pollingInterval: 20 })

/** A viem wallet client for a dev account, as the x402 client wants it (chain id 84532 = "base-sepolia"). */
export const walletFor = (account: PrivateKeyAccount) =>
  createWalletClient({ account, chain: chain(), transport: http(inject("rpcUrl")), pollingInterval: 20 }).extend(publicActions)

/**
 * A third party (dev account 9) submits a payment's own authorization on chain (EIP-3009 lets anyone): a front-runner.
 * Its transaction's hash and receipt status.
 */
export const frontRunAuthorization = async (p: {
  readonly asset: `0x${string}`
  readonly payer: string
  readonly payTo: `0x${string}`
  readonly amount: bigint
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly nonce: Hex
  readonly signature: Hex
}) => {
  const { r, s, v } = parseSignature(p.signature)
  const wallet = walletFor(devAccount(9))
  const hash = await wallet.writeContract({
    address: p.asset,
    abi: usdcAbi,
    functionName: "transferWithAuthorization",
    args: [getAddress(p.payer), p.payTo, p.amount, p.validAfter, p.validBefore, p.nonce, Number(v), r, s]
  })
  const { status } = await wallet.waitForTransactionReceipt({ hash })
  return { hash, status }
}

/** `fetch` that pays 402 challenges with the official x402 client (x402-fetch). */
export const x402Fetch = (account: PrivateKeyAccount, maxValue = 10_000_000n) =>
  // x402-fetch types its signer loosely across viem versions; a viem wallet client with publicActions is what it expects.
  wrapFetchWithPayment(fetch, walletFor(account) as unknown as Parameters<typeof wrapFetchWithPayment>[1], maxValue)

export const usdcBalance = (address: `0x${string}`) =>
  publicClient().readContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "balanceOf", args: [address] })

export const authorizationUsed = (payer: `0x${string}`, nonce: Hex) =>
  publicClient().readContract({ address: inject("usdcAddress"), abi: usdcAbi, functionName: "authorizationState", args: [payer, nonce] })

export interface PaymentOptions {
  readonly account: PrivateKeyAccount
  readonly value: bigint
  readonly to?: `0x${string}`
  readonly validAfter?: bigint
  readonly validBefore?: bigint
  readonly nonce?: Hex
  readonly network?: string
  /** Sign with this account instead (a wrong signature for `account`). */
  readonly signer?: PrivateKeyAccount
  /** Sign a different value than the one put in the header (a tampered payment). */
  readonly signedValue?: bigint
  readonly domainName?: string
}

/** Builds an X-PAYMENT header by hand (x402 v1 exact EVM), so tests can break any part of it. */
export const signPayment = async (o: PaymentOptions) => {
  const now = BigInt(Math.floor(Date.now() / 1000))
  const authorization = {
    from: o.account.address,
    to: o.to ?? TREASURY,
    value: o.value,
    validAfter: o.validAfter ?? now - 600n,
    validBefore: o.validBefore ?? now + 300n,
    nonce: o.nonce ?? (`0x${randomBytes(32).toString("hex")}` as Hex)
  }
  const signature = await (o.signer ?? o.account).signTypedData({
    domain: { name: o.domainName ?? "USDC", version: "2", chainId: 84532, verifyingContract: getAddress(inject("usdcAddress")) },
    types: transferWithAuthorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: { ...authorization, value: o.signedValue ?? authorization.value }
  })
  const payload = {
    x402Version: 1,
    scheme: "exact",
    network: o.network ?? "base-sepolia",
    payload: {
      signature,
      authorization: {
        ...authorization,
        value: authorization.value.toString(),
        validAfter: authorization.validAfter.toString(),
        validBefore: authorization.validBefore.toString()
      }
    }
  }
  return { header: Buffer.from(JSON.stringify(payload)).toString("base64"), nonce: authorization.nonce }
}

/** Signatures are single-use per signed timestamp: a client signing twice within one millisecond moves on a tick. */
let lastTimestamp = 0
const freshTimestamp = () => (lastTimestamp = Math.max(Date.now(), lastTimestamp + 1))

/** Wallet-signature headers (spec section 5) for an agent, signed by `account` at `timestamp` (ms; default now, never repeated). */
export const walletAuth = async (account: PrivateKeyAccount, agentId: string, options: { timestamp?: number; claimedWallet?: string } = {}) => {
  const message = `service-auth:${agentId}:${options.timestamp ?? freshTimestamp()}`
  const signature = await account.signMessage({ message })
  return { "X-Agent-Wallet": options.claimedWallet ?? account.address, "X-Agent-Signature": `${message}:sig:${signature}` }
}

/** A fresh account with ETH-less, USDC-less balance (a payer who cannot pay). */
export const strangerAccount = () => privateKeyToAccount(`0x${randomBytes(32).toString("hex")}` as Hex)

export interface Envelope {
  readonly success: boolean
  readonly data?: any
  readonly error?: { readonly code: string; readonly message: string; readonly details?: any }
  readonly meta?: any
}

export const call = async (url: string, init: RequestInit & { json?: unknown } = {}) => {
  const { json, ...rest } = init
  const response = await fetch(url, {
    ...rest,
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    headers: { ...(json === undefined ? {} : { "content-type": "application/json" }), ...(rest.headers as Record<string, string> | undefined) }
  })
  return parse(response)
}

const parse = async (response: Response) => {
  const text = await response.text()
  try {
    return { status: response.status, headers: response.headers, body: JSON.parse(text) as Envelope }
  } catch {
    throw new Error(`non-JSON response ${response.status}: ${text.slice(0, 300)}`)
  }
}

/** A JSON request paid by the official x402 client on behalf of `account`. */
export const paidCall = async (account: PrivateKeyAccount, url: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  parse(
    await x402Fetch(account)(url, {
      method: init.method ?? "POST",
      headers: { "content-type": "application/json", ...init.headers },
      ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) })
    })
  )
